package config

import (
	"net/url"
	"time"

	"github.com/swarmhq/swarm/escalation"
)

// Notify is [notify]: where the supervisor sends each escalation event
// (DESIGN §9.1). Neither Command nor Webhook set means no notifications.
type Notify struct {
	// Command runs once per event with the event's JSON on stdin and
	// SWARM_EVENT in its environment (the user's environment, unscrubbed).
	Command []string
	// Webhook is POSTed the event's JSON.
	Webhook string
	// MinSeverity drops events about less severe escalations.
	MinSeverity escalation.Severity
	// RemindEvery re-sends an open escalation nobody acked, at most
	// MaxReminders times.
	RemindEvery  time.Duration
	MaxReminders int
	// Timeout bounds one run of the command or one POST.
	Timeout time.Duration
}

// Enabled reports whether events go anywhere.
func (n Notify) Enabled() bool { return len(n.Command) > 0 || n.Webhook != "" }

var defaultNotify = Notify{MinSeverity: escalation.Info, RemindEvery: time.Hour, MaxReminders: 3, Timeout: 10 * time.Second}

type rawNotify struct {
	Command      []string `toml:"command"`
	Webhook      *string  `toml:"webhook"`
	MinSeverity  *string  `toml:"min_severity"`
	RemindEvery  *string  `toml:"remind_every"`
	MaxReminders *int     `toml:"max_reminders"`
	Timeout      *string  `toml:"timeout"`
}

func (b *builder) notify(r rawNotify) {
	n := &b.cfg.Notify
	if r.Command != nil {
		if len(r.Command) == 0 || r.Command[0] == "" {
			b.errorf("notify.command", "command must name a program: command = [\"notify-send-json\", \"--flag\"]")
		} else {
			n.Command = r.Command
		}
	}
	if r.Webhook != nil {
		u, err := url.Parse(*r.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			b.errorf("notify.webhook", "webhook must be an http:// or https:// URL, got %q", *r.Webhook)
		} else {
			n.Webhook = *r.Webhook
		}
	}
	if r.MinSeverity != nil {
		s, err := escalation.ParseSeverity(*r.MinSeverity)
		if err != nil {
			b.errorf("notify.min_severity", "min_severity: %v", err)
		} else {
			n.MinSeverity = s
		}
	}
	if r.RemindEvery != nil {
		n.RemindEvery = b.duration("notify.remind_every", *r.RemindEvery, false)
	}
	if r.MaxReminders != nil {
		if *r.MaxReminders < 0 {
			b.errorf("notify.max_reminders", "max_reminders must not be negative (0 sends none)")
		} else {
			n.MaxReminders = *r.MaxReminders
		}
	}
	if r.Timeout != nil {
		n.Timeout = b.duration("notify.timeout", *r.Timeout, false)
	}
}
