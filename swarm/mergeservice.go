package swarm

import (
	"context"
	"time"

	"github.com/swarmhq/swarm/lifecycle"
)

// mergePoll is how often the merge queue looks for candidates when
// nothing pokes it (a candidate queued by another process or host is
// also seen through the change feed).
const mergePoll = 5 * time.Second

// remoteFetchEvery is how often an idle queue fetches the [worktree] push
// remote's base, so that `swarm status` says what other hosts landed.
const remoteFetchEvery = time.Minute

// mergeQueue is the merge queue's service: after recovery it puts back
// what a crash cut short, then drains the queue whenever it is poked.
type mergeQueue struct {
	s    *Supervisor
	kick chan struct{}
}

func newMergeQueue(s *Supervisor) *mergeQueue {
	return &mergeQueue{s: s, kick: make(chan struct{}, 1)}
}

// poke makes the queue look now.
func (m *mergeQueue) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// queue is the MergeQueue the service runs, with the supervisor's store,
// git, poster and notice bus; nil when the worktrees are not git's.
func (m *mergeQueue) queue() *MergeQueue {
	git, ok := m.s.opts.Worktrees.(QueueGit)
	if !ok {
		return nil
	}
	s := m.s
	return &MergeQueue{Store: s.store, Git: git, Cfg: s.cfg.Merge, Remote: s.cfg.Worktree.Push, Poster: s.poster, Holder: s.opts.Holder, Now: s.clock.Now,
		Log: s.log.With("service", "merge-queue"),
		Notice: func(agent, text string) {
			s.bus.emit(lifecycle.Notice{At: s.clock.Now(), Agent: agent, Kind: lifecycle.NoticeInfo, Text: text})
		}}
}

func (m *mergeQueue) run(ctx context.Context) error {
	q := m.queue()
	if q == nil {
		return nil
	}
	if err := q.Recover(ctx); err != nil && ctx.Err() == nil {
		m.s.log.Warn("merge queue: recover", "err", err)
	}
	t := m.s.clock.NewTimer(mergePoll)
	defer t.Stop()
	last := ""
	var fetched time.Time
	for {
		if err := q.Drain(ctx); err != nil && ctx.Err() == nil {
			// The candidates went back to the queue; the next look tries
			// again, the supervisor keeps running. The operator hears of
			// each new reason once, not every look.
			m.s.log.Warn("merge queue", "err", err)
			if err.Error() != last {
				q.notice("", "merge queue: "+err.Error()+"; its candidates wait in the queue and are tried again")
			}
			last = err.Error()
		} else {
			last = ""
		}
		if now := m.s.clock.Now(); q.Remote != "" && now.Sub(fetched) >= remoteFetchEvery {
			fetched = now
			if _, err := q.Git.FetchBase(ctx, q.Remote); err != nil && ctx.Err() == nil {
				m.s.log.Warn("merge queue: fetch the remote's base", "remote", q.Remote, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-t.C:
			t.Reset(mergePoll)
		}
	}
}
