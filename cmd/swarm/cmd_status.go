package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/worktree"
)

// StatusOptions are the inputs of `swarm status`.
type StatusOptions struct {
	App *App
	Now func() time.Time
}

func init() { commands = append(commands, newStatusCmd) }

func newStatusCmd(app *App) *cobra.Command {
	opts := &StatusOptions{App: app, Now: time.Now}
	return &cobra.Command{
		Use:   "status",
		Short: "Show the agents, their states, sessions and mail",
		Long: `Show whether a supervisor is running, and for every agent its lifecycle
state, session number, pending mail (queued + delivered), errors, tokens and
heartbeat. A heartbeat older than three intervals is marked stale: the
supervisor is gone or stuck. Works with or without a running supervisor.

--json prints {"running", "pid", "agents": [{"name", "state", "session_seq",
"mode", "profile", "strategy", "capabilities", "last_report", "engine",
"branch", "worktree", "pending", "heartbeat_at", "stale",
"consecutive_errors", "total_errors", "tokens"}]}. mode is execute or
coordinate, profile code, review, delegate or null, capabilities the
vector of the agent's last session (else as configured), and last_report
{kind, task, message, at} or null.`,
		Example: `  swarm status
  swarm status --json | jq '.agents[] | {name, state}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), opts)
		},
	}
}

type statusJSON struct {
	Running bool          `json:"running"`
	Pid     *int          `json:"pid"`
	Agents  []agentStatus `json:"agents"`
}

type agentStatus struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	SessionSeq int64  `json:"session_seq"`
	modeJSON
	LastReport        *reportJSON `json:"last_report"`
	Engine            string      `json:"engine"`
	Branch            string      `json:"branch"`
	Worktree          string      `json:"worktree"`
	Pending           int         `json:"pending"`
	Urgent            int         `json:"urgent"`
	HeartbeatAt       *time.Time  `json:"heartbeat_at"`
	Stale             bool        `json:"stale"`
	ConsecutiveErrors int         `json:"consecutive_errors"`
	TotalErrors       int         `json:"total_errors"`
	Tokens            int64       `json:"tokens"`
	Activity          string      `json:"activity,omitempty"`
	StateSince        *time.Time  `json:"state_since,omitempty"`
}

// supervisorPid asks the control socket who is running.
func supervisorPid(ctx context.Context, l repo.Layout) (int, bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := control.Call(ctx, l, control.Request{Op: control.OpPing})
	if err != nil {
		return 0, false
	}
	var p struct {
		Pid int `json:"pid"`
	}
	_ = json.Unmarshal(resp.Data, &p)
	return p.Pid, true
}

func collectStatus(ctx context.Context, l repo.Layout, cfg *config.Config, st mailbox.Store, now time.Time) (statusJSON, error) {
	var out statusJSON
	if pid, ok := supervisorPid(ctx, l); ok {
		out.Running, out.Pid = true, &pid
	}
	rows, err := st.Agents(ctx)
	if err != nil {
		return out, err
	}
	byName := map[string]mailbox.Agent{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	for _, a := range cfg.Agents {
		eng := a.Engine
		row, ok := byName[a.Name]
		var caps mode.Vector
		if last, err := st.LastSession(ctx, a.Name, ""); err == nil {
			caps = last.Capabilities
		} else if !errors.Is(err, mailbox.ErrNoSuchSession) {
			return out, err
		}
		s := agentStatus{Name: a.Name, State: "Stopped", modeJSON: modeOf(a, caps), Engine: eng,
			Branch: worktree.Branch(a.Name), Worktree: filepathJoin(cfg.Worktree.Dir, a.Name)}
		if r, err := st.LastReport(ctx, a.Name); err == nil {
			s.LastReport = &reportJSON{Kind: string(r.Kind), Task: r.Task, Message: r.Message, At: r.At}
		} else if !errors.Is(err, mailbox.ErrNoReport) {
			return out, err
		}
		if ok {
			s.State, s.SessionSeq = string(row.State), row.SessionSeq
			if row.Engine != "" {
				s.Engine = row.Engine
			}
			if row.Worktree != "" {
				s.Worktree = row.Worktree
			}
			s.HeartbeatAt, s.StateSince = row.HeartbeatAt, row.StateSince
			s.ConsecutiveErrors, s.TotalErrors, s.Tokens, s.Activity = row.ConsecutiveErrors, row.TotalErrors, row.Tokens, row.Activity
		}
		c, err := st.Pending(ctx, a.Name)
		if err != nil {
			return out, err
		}
		s.Pending, s.Urgent = c.Queued+c.Delivered, c.Urgent
		if s.State != "Stopped" {
			stale := 3 * cfg.Liveness.Heartbeat
			s.Stale = !out.Running || s.HeartbeatAt == nil || now.Sub(*s.HeartbeatAt) > stale
		}
		out.Agents = append(out.Agents, s)
	}
	return out, nil
}

func runStatus(ctx context.Context, opts *StatusOptions) error {
	app := opts.App
	l, cfg, err := app.loadConfig()
	if err != nil {
		return err
	}
	st, err := app.openStore(ctx, l)
	if err != nil {
		return err
	}
	defer st.Close()
	now := opts.Now()
	s, err := collectStatus(ctx, l, cfg, st, now)
	if err != nil {
		return err
	}
	if app.JSON {
		return app.printJSON(s)
	}
	if s.Running {
		fmt.Fprintf(app.Stdout, "swarm is running (pid %d)\n\n", *s.Pid)
	} else {
		fmt.Fprintf(app.Stdout, "swarm is not running ('swarm up' starts it)\n\n")
	}
	tw := tabwriter.NewWriter(app.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tSESSION\tMODE\tENGINE\tMAIL\tERRORS\tTOKENS\tHEARTBEAT")
	for _, a := range s.Agents {
		hb := "-"
		if a.HeartbeatAt != nil {
			hb = humanAge(now.Sub(*a.HeartbeatAt)) + " ago"
		}
		if a.Stale {
			hb += " (stale)"
		}
		mail := fmt.Sprint(a.Pending)
		if a.Urgent > 0 {
			mail += fmt.Sprintf(" (%d urgent)", a.Urgent)
		}
		since := ""
		if a.StateSince != nil && a.State != "Stopped" {
			since = " " + humanAge(now.Sub(*a.StateSince))
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%d\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", a.Name, a.State, since, a.SessionSeq, a.modeWord(), a.Engine, mail,
			a.ConsecutiveErrors, a.TotalErrors, a.Tokens, hb)
	}
	return tw.Flush()
}

// reportJSON is an agent's last report in status --json.
type reportJSON struct {
	Kind    string    `json:"kind"`
	Task    string    `json:"task,omitempty"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// modeWord is the MODE column: the profile, else mode/strategy.
func (a agentStatus) modeWord() string {
	if a.Profile != nil {
		return *a.Profile
	}
	return a.Mode + "/" + a.Strategy
}
