package swarm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/proc"
)

// notifier sends escalation events to [notify]'s command and webhook.
//
// It is level-based like the rest of the supervisor: scan compares each
// unsettled escalation with what was sent about it (the notified
// bookkeeping in the store) and queues what is due; one sender goroutine
// delivers it and records it as sent. So an escalation raised while no
// supervisor ran is sent when one starts, a restart does not send again
// what was sent, and a failing hook is retried (with backoff) but never
// stops anything: the supervisor only ever does a non-blocking send on a
// bounded queue.
type notifier struct {
	cfgp   atomic.Pointer[config.Notify] // swapped by a reload: read with config
	store  mailbox.Store
	clock  Clock
	log    *slog.Logger
	dir    string // the command runs here: the repository root
	done   func() // called after each delivery: the desk looks again
	client *http.Client
	queue  chan notifyJob

	// attempts and backoff shape each hook's retries within one delivery.
	attempts int
	backoff  time.Duration

	mu       sync.Mutex
	inflight map[int64]bool      // escalations with a job queued or being sent
	retryAt  map[int64]time.Time // after a delivery that failed everywhere
	failures map[int64]int
	// sent is what this notifier recorded as sent (Notified) per
	// escalation: a look whose read of the rows began before a delivery
	// was recorded sees the delivery here, and does not send it again.
	sent map[int64]escalation.Notified
}

// notifyQueue bounds the jobs waiting for the sender.
const notifyQueue = 64

// Retry shape of one delivery, and the longest wait before a failed one is
// tried again.
const (
	notifyAttempts   = 3
	notifyBackoff    = 500 * time.Millisecond
	notifyRetryLimit = 5 * time.Minute
)

type notifyJob struct {
	esc   escalation.Escalation
	event string
}

func newNotifier(cfg config.Notify, dir string, st mailbox.Store, clock Clock, log *slog.Logger, done func()) *notifier {
	n := &notifier{
		store: st, clock: clock, log: log, done: done, dir: dir,
		client:   &http.Client{Timeout: cfg.Timeout},
		queue:    make(chan notifyJob, notifyQueue),
		attempts: notifyAttempts,
		backoff:  notifyBackoff,
		inflight: map[int64]bool{},
		retryAt:  map[int64]time.Time{},
		failures: map[int64]int{},
		sent:     map[int64]escalation.Notified{},
	}
	n.cfgp.Store(&cfg)
	return n
}

// config is the [notify] table in force.
func (n *notifier) config() config.Notify { return *n.cfgp.Load() }

// setConfig applies a reloaded [notify] table from the next event on.
func (n *notifier) setConfig(c config.Notify) { n.cfgp.Store(&c) }

// due says what is to be sent about e next, and from when: the opening,
// a reminder while nobody acked it, the ack, the resolution. An
// escalation whose opening was never sent gets nothing after it.
func (n *notifier) due(e escalation.Escalation) (event string, at time.Time, ok bool) {
	sent := e.Notified
	switch {
	case e.State == escalation.Open && sent.At == nil:
		return escalation.EventOpened, e.CreatedAt, true
	case e.State == escalation.Open && sent.State == escalation.Open && sent.Reminders < n.config().MaxReminders:
		last := *sent.At
		if sent.LastRemindedAt != nil {
			last = *sent.LastRemindedAt
		}
		return escalation.EventReminder, last.Add(n.config().RemindEvery), true
	case e.State == escalation.Acked && sent.State == escalation.Open:
		return escalation.EventAcked, e.CreatedAt, true
	case e.State == escalation.Resolved && (sent.State == escalation.Open || sent.State == escalation.Acked):
		return escalation.EventResolved, e.CreatedAt, true
	}
	return "", time.Time{}, false
}

// scan queues every event that is due and returns when the next one
// falls due (a reminder or a retry), if any.
func (n *notifier) scan(ctx context.Context) (next time.Time, ok bool) {
	rows, err := n.store.Escalations(ctx, mailbox.EscalationFilter{Unsettled: true})
	if err != nil {
		if ctx.Err() == nil {
			n.log.Warn("read escalations to notify", "err", err)
		}
		return time.Now().Add(time.Second), true
	}
	now := n.clock.Now()
	later := func(t time.Time) {
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	for _, e := range rows {
		if e.Severity.Rank() < n.config().MinSeverity.Rank() {
			continue
		}
		n.mu.Lock()
		if sent, ok := n.sent[e.ID]; ok {
			e.Notified = sent // newer than a row read before it was recorded
		}
		event, at, has := n.due(e)
		if !has {
			n.mu.Unlock()
			continue
		}
		busy := n.inflight[e.ID]
		if r, retry := n.retryAt[e.ID]; retry && r.After(at) {
			at = r
		}
		if busy || at.After(now) {
			n.mu.Unlock()
			if !busy {
				later(at)
			}
			continue
		}
		select {
		case n.queue <- notifyJob{esc: e, event: event}:
			n.inflight[e.ID] = true
		default: // the sender is behind; look again soon
			later(now.Add(time.Second))
		}
		n.mu.Unlock()
	}
	return next, ok
}

// send delivers queued jobs until ctx ends.
func (n *notifier) send(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-n.queue:
			n.deliver(ctx, job)
		}
	}
}

// deliver sends one event to every hook, each retried with backoff, and
// records it as sent when at least one hook took it.
func (n *notifier) deliver(ctx context.Context, job notifyJob) {
	id := job.esc.ID
	now := n.clock.Now() // when it was sent, for the next reminder
	payload, err := escalation.Payload(job.esc, job.event)
	delivered, failed := 0, 0
	if err == nil {
		if len(n.config().Command) > 0 {
			if err := n.retry(ctx, func(ctx context.Context) error { return n.runCommand(ctx, job.event, payload) }); err != nil {
				failed++
				n.log.Error("notify command failed; will retry", "escalation", id, "event", job.event, "command", n.config().Command[0], "err", err)
			} else {
				delivered++
			}
		}
		if n.config().Webhook != "" {
			if err := n.retry(ctx, func(ctx context.Context) error { return n.post(ctx, job.event, payload) }); err != nil {
				failed++
				n.log.Error("notify webhook failed; will retry", "escalation", id, "event", job.event, "webhook", n.config().Webhook, "err", err)
			} else {
				delivered++
			}
		}
	} else {
		failed++
		n.log.Error("encode notification", "escalation", id, "err", err)
	}
	if delivered == 0 && failed > 0 {
		n.mu.Lock()
		delete(n.inflight, id)
		if ctx.Err() == nil {
			n.failures[id]++
			wait := min(notifyBackoff<<min(n.failures[id], 20), notifyRetryLimit)
			n.retryAt[id] = now.Add(wait)
		}
		n.mu.Unlock()
		n.done()
		return
	}
	// Recorded before the escalation leaves the in-flight set, so a look
	// meanwhile cannot queue the same event again.
	sent := job.esc.Notified
	defer func() {
		n.mu.Lock()
		n.sent[id] = sent
		delete(n.inflight, id)
		delete(n.failures, id)
		delete(n.retryAt, id)
		n.mu.Unlock()
		n.done()
	}()
	switch job.event {
	case escalation.EventOpened:
		sent.State, sent.At = escalation.Open, &now
	case escalation.EventReminder:
		sent.Reminders++
		sent.LastRemindedAt = &now
	case escalation.EventAcked:
		sent.State = escalation.Acked
	case escalation.EventResolved:
		sent.State = escalation.Resolved
	}
	bctx, cancel := bookkeeping(ctx)
	defer cancel()
	if err := n.store.SetNotified(bctx, id, sent); err != nil {
		n.log.Error("record a notification", "escalation", id, "event", job.event, "err", err)
	}
	n.log.Info("notified", "escalation", id, "event", job.event)
}

// retry runs fn up to n.attempts times, waiting n.backoff, then twice as
// long, between attempts.
func (n *notifier) retry(ctx context.Context, fn func(context.Context) error) error {
	wait := n.backoff
	var err error
	for i := range n.attempts {
		if i > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("%w (then the supervisor stopped)", err)
			case <-t.C:
			}
			wait *= 2
		}
		if err = fn(ctx); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("%d attempts: %w", n.attempts, err)
}

// runCommand runs the notify command in the repository root with the
// event's JSON on stdin. It gets the user's environment as it is (a
// notification may need a token), plus SWARM_EVENT.
func (n *notifier) runCommand(ctx context.Context, event string, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, n.config().Timeout)
	defer cancel()
	argv := n.config().Command
	cmd := proc.Command(ctx, 2*time.Second, argv[0], argv[1:]...)
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "SWARM_EVENT="+event)
	cmd.Stdin = bytes.NewReader(payload)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = proc.KillGroup(cmd.Process.Pid)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not finish within %s", argv[0], n.config().Timeout)
		}
		if msg := strings.TrimSpace(lastBytes(out.String(), 500)); msg != "" {
			return fmt.Errorf("%s: %w: %s", argv[0], err, msg)
		}
		return fmt.Errorf("%s: %w", argv[0], err)
	}
	return nil
}

// post POSTs the event's JSON to the webhook; any 2xx answer takes it.
func (n *notifier) post(ctx context.Context, event string, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.config().Webhook, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Swarm-Event", event)
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s: %s", n.config().Webhook, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
