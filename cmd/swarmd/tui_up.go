package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/identity"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/lifecycle"

	"github.com/dustin/go-humanize"
	"github.com/mattn/go-isatty"

	"github.com/swarmhq/swarm/config"
	"github.com/swarmhq/swarm/escalation"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
	"github.com/swarmhq/swarm/promptpipe"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"github.com/swarmhq/swarm/tui"
	"github.com/swarmhq/swarm/verbs"
)

// isTerminal reports whether w is a terminal: the live view needs one.
func isTerminal(w io.Writer) bool {
	if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
		w = u.Unwrap() // termsafe's writer over the real stdout
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// runUpTUI runs the supervisor under the live view. q then y (or Ctrl-C in the
// view) stops the swarm gracefully, and the view stays until every agent
// has stopped; SIGTERM and `swarm down` stop it the same way. Notices still
// go to the supervisor log; nothing else writes to the terminal until the
// view is gone.
//
// webURL, when set, is the web desk's (swarm up --web): the title shows it.
func runUpTUI(ctx context.Context, stop context.CancelCauseFunc, app *App, l repo.Layout, cfg *config.Config, st mailbox.Store, sup *swarm.Supervisor, webURL string) error {
	// Subscribe before Run starts so the view misses nothing. The stream
	// ends when Run closes it or returns: Run closes it only when it got as
	// far as starting the agents.
	viewCtx, endView := context.WithCancel(context.WithoutCancel(ctx))
	defer endView()
	notices := sup.Watch(viewCtx)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = sup.Run(ctx)
	}()

	src := &upSource{storeSource: newStoreSource(l, cfg, st, sup.Poster()), notices: notices, done: done}
	src.decide = sup.Decide // in process: the hold is released at once
	title := fmt.Sprintf("swarm up · %s · pid %d", l.Root, os.Getpid())
	if webURL != "" {
		title += " · web " + webURL
	}
	viewErr := tui.Run(viewCtx, src, tui.Options{
		Title: title,
		Stop:  func() { stop(swarm.ErrShutdown) },
	})
	stop(swarm.ErrShutdown) // a no-op when the view already asked
	if !errors.Is(viewErr, tui.ErrSourceEnded) {
		// The view went (the operator left, or the terminal failed)
		// before the agents had stopped.
		fmt.Fprintln(app.Stderr, "swarm: stopping gracefully; Ctrl-C twice forces the stop")
	}
	<-done
	if runErr != nil && !errors.Is(runErr, swarm.ErrShutdown) && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	if viewErr != nil && !errors.Is(viewErr, tui.ErrSourceEnded) {
		return viewErr
	}
	fmt.Fprintln(app.Stdout, stoppedLine)
	return nil
}

// upSource is the live view's source inside `swarm up`: notices straight
// from the supervisor.
type upSource struct {
	*storeSource
	notices <-chan lifecycle.Notice
	done    <-chan struct{} // closed when the supervisor's Run returned
}

func (s *upSource) Next(ctx context.Context) (lifecycle.Notice, error) {
	select {
	case n, ok := <-s.notices:
		if !ok {
			return lifecycle.Notice{}, io.EOF
		}
		return n, nil
	case <-s.done:
		return lifecycle.Notice{}, io.EOF
	case <-ctx.Done():
		return lifecycle.Notice{}, context.Cause(ctx)
	}
}

// storeSource is what `swarm up` and `swarm watch` read and do alike:
// snapshots from the database, logs from .swarm/logs, mail through the
// store (with a poke) and pause/resume through the control socket.
type storeSource struct {
	l      repo.Layout
	cfg    *config.Config
	st     mailbox.Store
	poster *mailbox.Poster
	now    func() time.Time
	// decide acks or resolves an escalation; nil: through the store, then
	// a poke of the supervisor.
	decide func(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error)
}

func newStoreSource(l repo.Layout, cfg *config.Config, st mailbox.Store, poster *mailbox.Poster) *storeSource {
	return &storeSource{l: l, cfg: cfg, st: st, poster: poster, now: time.Now}
}

// viewMail is how many of the latest messages a snapshot reads.
const viewMail = 30

func (s *storeSource) Snapshot(ctx context.Context) (tui.Snapshot, error) {
	// Agents spawned since the view started appear too; the copy leaves
	// the configuration the supervisor reads alone.
	cfg := *s.cfg
	cfg.Agents = slices.Clone(s.cfg.Agents)
	if _, err := swarm.WithSpawned(ctx, &cfg, s.st); err != nil {
		return tui.Snapshot{}, err
	}
	status, err := collectStatus(ctx, identity.Operator(), s.l, &cfg, s.st, s.now())
	if err != nil {
		return tui.Snapshot{}, err
	}
	var snap tui.Snapshot
	if status.Team != nil {
		snap.Team = teamLine(*status.Team)
	}
	for _, a := range status.Agents {
		ta := tui.Agent{Name: a.Name, State: a.State, Seq: a.SessionSeq, Pending: a.Pending, Urgent: a.Urgent,
			Activity: a.Activity, Tokens: a.Tokens}
		if a.StateSince != nil {
			ta.StateSince = *a.StateSince
		}
		if r := a.LastReport; r != nil {
			what := r.Kind
			if r.Task != "" {
				what += " " + r.Task
			}
			ta.Report = what + ": " + r.Message // the view makes it safe
		}
		ta.Budget = budgetText(a.Budget)
		if a.Usage.CostUSD > 0 || a.Usage.Unpriced > 0 {
			ta.Cost = costText(a.Usage, nil)
		}
		ta.Mode = modeText(a.ModeView)
		snap.Agents = append(snap.Agents, ta)
		snap.Tokens += a.Tokens
	}
	snap.Budget = budgetText(status.Budget)
	// Every message has an agent or operator as its recipient, so the
	// newest of each inbox hold the newest overall.
	seen := map[int64]bool{}
	for _, name := range append(cfg.AgentNames(), message.Operator) {
		ms, err := s.st.Inbox(ctx, name, mailbox.Filter{Limit: viewMail})
		if err != nil {
			return snap, err
		}
		for _, m := range ms {
			if !seen[m.ID] {
				seen[m.ID] = true
				snap.Mail = append(snap.Mail, m)
			}
		}
	}
	snap.Escalations = status.Escalations
	snap.Workflows = workflowLines(status.Workflows)
	snap.Merges = mergeLines(status.Merges)
	slices.SortFunc(snap.Mail, func(a, b message.Message) int { return cmp.Compare(a.ID, b.ID) })
	snap.Mail = snap.Mail[max(len(snap.Mail)-viewMail, 0):]
	if snap.Sessions, err = s.st.SessionCount(ctx); err != nil {
		return snap, err
	}
	return snap, nil
}

// tailBytes bounds a tail read: the view shows a screenful.
const tailBytes = 64 << 10

func (s *storeSource) Tail(ctx context.Context, agent string, seq int64, lines int) ([]string, error) {
	f, err := os.Open(s.l.SessionLog(agent, seq))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-tailBytes, 0)
	b := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b = b[:n]
	if off > 0 {
		// Drop the partial first line.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	text := strings.TrimRight(string(b), "\n")
	if text == "" {
		return nil, nil
	}
	out := strings.Split(text, "\n")
	return out[max(len(out)-lines, 0):], nil
}

func (s *storeSource) Prompt(ctx context.Context, agent string, seq int64) ([]tui.Section, error) {
	sess, err := s.st.Session(ctx, agent, seq)
	if err != nil {
		return nil, err
	}
	var out []tui.Section
	for _, sec := range promptpipe.SplitSections(sess.Prompt) {
		out = append(out, tui.Section{Number: sec.Number, Title: sec.Title, Body: sec.Body})
	}
	if len(out) == 0 && strings.TrimSpace(sess.Prompt) != "" {
		out = []tui.Section{{Title: "Prompt", Body: sess.Prompt}}
	}
	return out, nil
}

// Send is the send verb as the operator.
func (s *storeSource) Send(ctx context.Context, to, body string, urgent bool) (message.Message, error) {
	d := message.Draft{To: to, Body: body}
	if urgent {
		d.Urgency = message.Urgent
	}
	ms, err := verbs.Send(ctx, identity.Operator(), s.poster, d, false)
	if err != nil {
		return message.Message{}, err
	}
	return ms[0], nil
}

func (s *storeSource) SetPaused(ctx context.Context, agent string, paused bool) error {
	verb := verbs.Resume
	if paused {
		verb = verbs.Pause
	}
	_, err := verb(ctx, identity.Operator(), socketRuntime{l: s.l}, agent)
	return err
}

func (s *storeSource) Decide(ctx context.Context, id int64, action escalation.Event) (escalation.Escalation, error) {
	return s.DecideNote(ctx, id, action, "")
}

// DecideNote is the decide verb as the operator, with the note the agent
// reads in its next prompt.
func (s *storeSource) DecideNote(ctx context.Context, id int64, action escalation.Event, note string) (escalation.Escalation, error) {
	var e escalation.Escalation
	var err error
	if s.decide != nil {
		e, err = s.decide(ctx, id, action, note)
	} else if e, err = verbs.Decide(ctx, identity.Operator(), s.st, id, action, note); err == nil {
		pokeEscalation(ctx, s.l, id)
	}
	if err != nil || action != escalation.Event(escalation.Approve) || e.Kind != escalation.KindApproval {
		return e, err
	}
	// Approving a work item's approval merges its reviewed commit, as
	// 'swarm escalation approve' does.
	q, err := mergeQueue(ctx, s.l, s.cfg, s.st, nil)
	if err != nil {
		return e, err
	}
	if _, _, _, err := verbs.MergeApproved(ctx, identity.Operator(), s.st, s.cfg, q, e); err != nil {
		return e, fmt.Errorf("escalation %d is approved, but %w; fix that, then run 'swarm workflow merge'", e.ID, err)
	}
	return e, nil
}

// modeText is an agent's mode for the web desk: "execute/plan:
// can_message, can_escalate".
func modeText(m modeJSON) string {
	out := m.Mode
	if m.Strategy != "" {
		out += "/" + m.Strategy
	}
	var caps []string
	for _, c := range m.Capabilities.Enabled() {
		caps = append(caps, string(c))
	}
	if len(caps) > 0 {
		out += ": " + strings.Join(caps, ", ")
	}
	return out
}

// budgetText is a budget's spending for the live view: "1,600/1,000 in
// 24h", or "" without a budget.
func budgetText(b *verbs.BudgetUse) string {
	if b == nil {
		return ""
	}
	var caps []string
	if b.Tokens > 0 {
		caps = append(caps, fmt.Sprintf("%s/%s", humanize.Comma(b.Used), humanize.Comma(b.Tokens)))
	}
	if b.USD > 0 {
		caps = append(caps, fmt.Sprintf("%s/%s", swarm.USD(b.UsedUSD), swarm.USD(b.USD)))
	}
	return strings.Join(caps, ", ") + " in " + b.Window
}
