package mailboxtest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmhq/swarm/fsm"
	"github.com/swarmhq/swarm/mailbox"
	"github.com/swarmhq/swarm/merge"
)

// testMergeQueue: candidates are queued first in, first out, one live
// candidate per agent and commit; a claim is a compare-and-set of queued
// to testing (a second claim of the same candidate fails), bookkeeping is
// saved beside the state, leaving testing clears the claim, and every move
// is a merge event carrying the candidate's agent.
func testMergeQueue(e *env) {
	t, s := e.t, e.s
	enqueue := func(agent, commit string) (merge.Candidate, error) {
		var c merge.Candidate
		err := s.InTx(e.ctx, func(tx mailbox.Tx) error {
			var err error
			c, err = tx.EnqueueCandidate(merge.Candidate{Agent: agent, Commit: commit, Source: merge.FromLand, By: "operator"})
			if err != nil {
				return err
			}
			_, err = fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(c.ID), "", merge.Enqueue, merge.Queued, "", 0)
			return err
		})
		return c, err
	}
	a, err := enqueue("alice", "aaaa1111")
	if err != nil {
		t.Fatal(err)
	}
	b, err := enqueue("bob", "bbbb2222")
	if err != nil {
		t.Fatal(err)
	}
	if a.State != merge.Queued || a.ID == 0 || b.ID <= a.ID || a.By != "operator" || a.Source != merge.FromLand {
		t.Fatalf("enqueued %+v, %+v", a, b)
	}
	var qe *mailbox.QueuedError
	if _, err := enqueue("alice", "aaaa1111"); !errors.As(err, &qe) || !errors.Is(err, mailbox.ErrCandidateQueued) || qe.Candidate.ID != a.ID {
		t.Fatalf("the same commit again: %v, want a QueuedError naming #%d", err, a.ID)
	}
	move := func(id int64, from merge.State, ev merge.Event, to merge.State) error {
		return s.InTx(e.ctx, func(tx mailbox.Tx) error {
			_, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(id), from, ev, to, "", 0)
			return err
		})
	}
	// Claim the first of the queue.
	at := e.clk.Now().Add(time.Second)
	err = s.InTx(e.ctx, func(tx mailbox.Tx) error {
		qs, err := tx.QueuedCandidates(1)
		if err != nil {
			return err
		}
		if len(qs) != 1 || qs[0].ID != a.ID {
			t.Fatalf("QueuedCandidates(1) = %+v, want #%d first", qs, a.ID)
		}
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(a.ID), merge.Queued, merge.Claim, merge.Testing, "", 0); err != nil {
			return err
		}
		c := qs[0]
		c.Claim, c.ClaimedAt, c.Batch, c.CIRuns = "host-1", &at, "merge-1-1", 2
		return tx.SaveCandidate(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := move(a.ID, merge.Queued, merge.Claim, merge.Testing); !errors.Is(err, mailbox.ErrStateConflict) {
		t.Fatalf("a second claim: %v, want ErrStateConflict", err)
	}
	got, err := s.Candidate(e.ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != merge.Testing || got.Claim != "host-1" || got.ClaimedAt == nil || !got.ClaimedAt.Equal(at) || got.Batch != "merge-1-1" || got.CIRuns != 2 {
		t.Fatalf("claimed = %+v", got)
	}
	// Retest: back in the queue, unclaimed, still ahead of bob.
	if err := move(a.ID, merge.Testing, merge.Retest, merge.Queued); err != nil {
		t.Fatal(err)
	}
	queued, err := s.Candidates(e.ctx, mailbox.CandidateFilter{States: []merge.State{merge.Queued}})
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 2 || queued[0].ID != a.ID || queued[0].Claim != "" || queued[0].ClaimedAt != nil || queued[1].ID != b.ID {
		t.Fatalf("queued after a retest = %+v", queued)
	}
	// Conflict: it leaves the queue, and the same commit may be queued again.
	if err := move(a.ID, merge.Queued, merge.Claim, merge.Testing); err != nil {
		t.Fatal(err)
	}
	err = s.InTx(e.ctx, func(tx mailbox.Tx) error {
		c, err := tx.Candidate(a.ID)
		if err != nil {
			return err
		}
		if _, err := fsm.Apply(tx, merge.Table, fsm.SubjectMerge, merge.Subject(a.ID), merge.Testing, merge.Conflicts, merge.Conflict, "conflict", 0); err != nil {
			return err
		}
		c.Reason, c.Files = "conflict", []string{"api/users.go"}
		return tx.SaveCandidate(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(e.ctx, func(tx mailbox.Tx) error { return tx.SaveCandidate(merge.Candidate{ID: 9999}) }); !errors.Is(err, mailbox.ErrNoSuchCandidate) {
		t.Fatalf("SaveCandidate of no row: %v", err)
	}
	if _, err := s.Candidate(e.ctx, 9999); !errors.Is(err, mailbox.ErrNoSuchCandidate) {
		t.Fatalf("Candidate of no row: %v", err)
	}
	again, err := enqueue("alice", "aaaa1111")
	if err != nil {
		t.Fatalf("queue a commit again after its conflict: %v", err)
	}
	mine, err := s.Candidates(e.ctx, mailbox.CandidateFilter{Agent: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 2 || mine[0].State != merge.Conflict || len(mine[0].Files) != 1 || mine[0].Files[0] != "api/users.go" || mine[1].ID != again.ID {
		t.Fatalf("alice's candidates = %+v", mine)
	}
	newest, err := s.Candidates(e.ctx, mailbox.CandidateFilter{Newest: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(newest) != 2 || newest[0].ID != b.ID || newest[1].ID != again.ID {
		t.Fatalf("the newest two = %+v", newest)
	}
	evs, err := s.Events(e.ctx, mailbox.EventFilter{Kind: fsm.SubjectMerge, Subjects: []string{merge.Subject(a.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5 || evs[0].From != nil || evs[0].To != string(merge.Queued) || evs[4].To != string(merge.Conflict) ||
		evs[4].Cause != "conflict" || evs[4].AgentName() != "alice" {
		t.Fatalf("merge events = %+v", evs)
	}
}

// testMergeQueueRacingTwins: two connections (two hosts) queue the same
// agent and commit at the same moment: one stores it, the other gets the
// QueuedError naming it, never a raw unique violation.
func testMergeQueueRacingTwins(e *env) {
	t := e.t
	if e.other == nil {
		return
	}
	stores := []mailbox.Store{e.s, e.other()}
	var serial atomic.Bool // the store never had both transactions open
	for round := range 10 {
		commit := fmt.Sprintf("cafe%04d", round)
		type out struct {
			c   merge.Candidate
			err error
		}
		outs := make(chan out, len(stores))
		start := make(chan struct{})
		// Both transactions open before either queues: a barrier inside
		// them, given up after a second where the store runs one
		// transaction at a time (SQLite), so the other never gets in.
		var inTx sync.WaitGroup
		inTx.Add(len(stores))
		both := make(chan struct{})
		go func() { inTx.Wait(); close(both) }()
		for _, st := range stores {
			go func() {
				<-start
				var c merge.Candidate
				first := true
				err := st.InTx(e.ctx, func(tx mailbox.Tx) error {
					if first {
						first = false
						inTx.Done()
						select {
						case <-both:
						case <-time.After(time.Second):
							serial.Store(true)
						}
					}
					var err error
					c, err = tx.EnqueueCandidate(merge.Candidate{Agent: "alice", Commit: commit, Source: merge.FromLand, By: "operator"})
					return err
				})
				outs <- out{c, err}
			}()
		}
		close(start)
		var stored []merge.Candidate
		var lost []error
		for range stores {
			o := <-outs
			if o.err == nil {
				stored = append(stored, o.c)
			} else {
				lost = append(lost, o.err)
			}
		}
		var qe *mailbox.QueuedError
		if len(stored) != 1 || len(lost) != 1 || !errors.As(lost[0], &qe) || qe.Candidate.ID != stored[0].ID {
			t.Fatalf("round %d: stored %+v, errors %v; want one stored and a QueuedError naming it", round, stored, lost)
		}
		if serial.Load() {
			return // nothing races in a store that runs one at a time
		}
	}
}
