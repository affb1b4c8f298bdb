package swarm

import (
	"context"
	"fmt"
	"sync"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/lifecycle"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/message"
)

// Wake is the supervisor's mailbox.Waker: mail posted in this process, or
// announced by another process's poke, wakes exactly its recipients'
// runners (urgent mail first, so an interrupt never waits for the
// notices), then is announced once.
func (s *Supervisor) Wake(ctx context.Context, posted []message.Message) {
	// What each recipient was doing when the supervisor first saw the
	// mail: an OpMail that comes after the change feed found the same mail
	// answers with this, not with the state the wake-up already changed.
	s.mail.note(s.deliveries(posted))
	for _, m := range posted {
		if r, ok := s.lookup(m.To); ok {
			r.poke(m.IsUrgent())
		}
		if m.To == message.Swarm {
			s.flow.poke() // an answer to the workflow engine
			s.team.poke() // an ACK of a team ping, maybe
		}
	}
	s.announce(posted)
}

// deliveries says, for mail just stored, what each recipient is doing:
// whether this supervisor runs it, its state, and whether urgent mail cuts
// its running session short (the first urgent message for it does) or
// joins it at the next tool call. It only reads: call it just before Wake,
// so the answer describes the moment the mail came.
func (s *Supervisor) deliveries(ms []message.Message) []control.Delivery {
	out := make([]control.Delivery, len(ms))
	hit := map[string]bool{}
	for i, m := range ms {
		d := control.Delivery{ID: m.ID, To: m.To}
		if r, ok := s.lookup(m.To); ok {
			d.Started = true
			st := r.liveState()
			d.State = string(st)
			inSession := st == lifecycle.Running || st == lifecycle.Spawning
			if m.IsUrgent() && inSession && !hit[m.To] {
				if r.boundary() {
					d.Joins = true
				} else {
					d.Interrupted = true
					hit[m.To] = true
				}
			}
		}
		out[i] = d
	}
	return out
}

// wakeAll wakes every runner as if urgent mail had come: a poke that does
// not say what arrived, or a change the feed saw. Each runner checks the
// store for itself.
func (s *Supervisor) wakeAll() {
	for _, r := range s.allRunners() {
		r.poke(true)
	}
	s.flow.poke()
	s.merges.poke() // swarm land queued a candidate
}

// announce emits one notice per message not announced before.
func (s *Supervisor) announce(ms []message.Message) {
	for _, m := range s.mail.fresh(ms) {
		s.bus.emit(lifecycle.Notice{At: m.CreatedAt, Agent: m.To, Kind: lifecycle.NoticeMessage, Message: &m})
	}
}

// followFeed is the fallback wake-up: the store's change feed reports
// writes by other processes whose poke was missed; the mail stored since
// the last look wakes its recipients.
func (s *Supervisor) followFeed(ctx context.Context) error {
	// Opening the feed reads and listens: a database restarting as the
	// supervisor starts is waited out, not a reason to stop the swarm.
	var f mailbox.Feed
	err := s.whileAway(ctx, "open the change feed", func() (err error) {
		f, err = s.store.Feed(ctx, s.opts.PollInterval)
		return err
	})
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		if err := f.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch the database for changes: %w", err)
		}
		if err := s.catchUp(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("read new mail", "err", err)
		}
		// An escalation raised or decided by another process whose poke
		// was missed, or a workflow item another process moved.
		s.EscalationChanged()
		s.flow.poke()
		s.merges.poke() // a candidate queued by a command or another host
	}
}

// catchUp wakes the recipients of every message stored since the last one
// seen, and announces it.
func (s *Supervisor) catchUp(ctx context.Context) error {
	const page = 200
	for {
		ms, err := s.store.MessagesSince(ctx, s.mail.low(), page)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return nil
		}
		fresh := s.mail.fresh(ms)
		for _, m := range fresh {
			if r, ok := s.lookup(m.To); ok {
				r.poke(m.IsUrgent())
			}
			if m.To == message.Swarm {
				s.flow.poke()
				s.team.poke()
			}
			s.bus.emit(lifecycle.Notice{At: m.CreatedAt, Agent: m.To, Kind: lifecycle.NoticeMessage, Message: &m})
		}
		s.mail.advance(ms[len(ms)-1].ID)
		if len(ms) < page {
			return nil
		}
	}
}

// mailTracker remembers which messages were announced: every id up to a
// low-water mark, plus the ones above it that a wake already announced. A
// message is announced once whether a poke, the feed, or both report it.
type mailTracker struct {
	mu   sync.Mutex
	mark int64
	seen map[int64]bool
	// came is what each recent message's recipient was doing when the
	// supervisor first saw it (the newest cameCap, oldest dropped first).
	came  map[int64]control.Delivery
	order []int64
}

// cameCap bounds the deliveries remembered: an OpMail answers within
// moments of the mail's first sighting.
const cameCap = 4096

// note remembers the deliveries of mail seen for the first time.
func (t *mailTracker) note(ds []control.Delivery) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.came == nil {
		t.came = map[int64]control.Delivery{}
	}
	for _, d := range ds {
		if _, ok := t.came[d.ID]; ok {
			continue
		}
		t.came[d.ID] = d
		t.order = append(t.order, d.ID)
	}
	for len(t.order) > cameCap {
		delete(t.came, t.order[0])
		t.order = t.order[1:]
	}
}

// recall is what message id's recipient was doing when it was first seen.
func (t *mailTracker) recall(id int64) (control.Delivery, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.came[id]
	return d, ok
}

// start sets the low-water mark to the newest stored message: what was
// there before this run is not news.
func (t *mailTracker) start(ctx context.Context, st mailbox.Store) error {
	id, err := st.NewestMessageID(ctx)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.mark, t.seen = id, map[int64]bool{}
	t.mu.Unlock()
	return nil
}

func (t *mailTracker) low() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mark
}

// fresh returns the messages of ms not announced yet, and marks them.
func (t *mailTracker) fresh(ms []message.Message) []message.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[int64]bool{}
	}
	var out []message.Message
	for _, m := range ms {
		if m.ID <= t.mark || t.seen[m.ID] {
			continue
		}
		t.seen[m.ID] = true
		out = append(out, m)
	}
	// Ids announced in order move the mark on, so mail posted in this
	// process (which the change feed never reports) does not pile up.
	for t.seen[t.mark+1] {
		delete(t.seen, t.mark+1)
		t.mark++
	}
	return out
}

// advance moves the low-water mark to id: every message up to it has been
// read in order, so the seen set below it can go.
func (t *mailTracker) advance(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id <= t.mark {
		return
	}
	t.mark = id
	for k := range t.seen {
		if k <= id {
			delete(t.seen, k)
		}
	}
}
