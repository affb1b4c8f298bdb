package protocol

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeStore is an in-memory Resolver: stored envelopes by msg_id, and the
// commits the repository has.
type fakeStore struct {
	mu      sync.Mutex
	msgs    map[string]Stored
	commits map[string]bool
	fail    error // returned by every lookup when set
	lookups int
}

func newStore() *fakeStore {
	return &fakeStore{msgs: map[string]Stored{}, commits: map[string]bool{}}
}

func (s *fakeStore) MessageExists(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.fail != nil {
		return false, s.fail
	}
	_, ok := s.msgs[id]
	return ok, nil
}

func (s *fakeStore) Lookup(_ context.Context, id string) (Stored, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.fail != nil {
		return Stored{}, false, s.fail
	}
	m, ok := s.msgs[id]
	return m, ok, nil
}

func (s *fakeStore) CommitExists(_ context.Context, hash string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lookups++
	if s.fail != nil {
		return false, s.fail
	}
	for c := range s.commits {
		if len(hash) <= len(c) && c[:len(hash)] == hash {
			return true, nil
		}
	}
	return false, nil
}

func (s *fakeStore) put(e Envelope) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgs[e.MsgID] = StoredOf(e)
}

// t0 is the fake clock's time: 2026-11-23T10:00:00.123Z.
var t0 = time.Date(2026, 11, 23, 10, 0, 0, 123e6, time.UTC)

// fakeClock returns the same instant until moved, so collisions are
// reproducible.
type fakeClock struct{ at time.Time }

func (c *fakeClock) Now() time.Time { return c.at }

func newBuilder(s *fakeStore) *Builder {
	clock := &fakeClock{at: t0}
	return &Builder{Resolver: s, BaseBranch: "develop", Now: clock.Now}
}

// seeded returns a store holding a dispatch T-42 lead→backend, its result,
// a review request swarm→critic and a ping swarm→backend, plus one commit.
func seeded(t testing.TB) (*fakeStore, map[string]Envelope) {
	t.Helper()
	s := newStore()
	s.commits["0123456789abcdef0123456789abcdef01234567"] = true
	b := newBuilder(s)
	out := map[string]Envelope{}
	add := func(name string, d Draft) {
		t.Helper()
		e, _, err := b.Build(context.Background(), d)
		if err != nil {
			t.Fatalf("seeding %s: %v", name, err)
		}
		s.put(e)
		out[name] = e
	}
	add("dispatch", Draft{Type: TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-42",
		Payload: []byte(`{"description":"Add pagination to GET /users","branch":"swarm/backend","acceptance_criteria":["page size 50","tests pass"],"risk_level":"medium"}`)})
	add("other-dispatch", Draft{Type: TypeTaskDispatch, From: "lead", To: "backend", TaskID: "T-41",
		Payload: []byte(`{"description":"x","branch":"swarm/backend","acceptance_criteria":["y"],"risk_level":"low"}`)})
	add("result", Draft{Type: TypeTaskResult, From: "backend", To: "lead", TaskID: "T-42", ContextRef: []string{out["dispatch"].MsgID},
		Payload: []byte(`{"status":"completed","summary":"done","commit_hash":"0123456"}`)})
	add("review", Draft{Type: TypeReviewRequest, From: "swarm", To: "critic", TaskID: "T-42",
		Payload: []byte(`{"original_dispatch_ref":"` + out["dispatch"].MsgID + `","task_result_ref":"` + out["result"].MsgID + `","reject_count":1,"acceptance_criteria":["page size 50","tests pass"],"diff":"a < b && c","ci_status":"passed"}`)})
	add("ping", Draft{Type: TypePing, From: "swarm", To: "backend", TaskID: "team-analysis", Payload: []byte(`{"code":"CORE_BOOTSTRAP_PING"}`)})
	return s, out
}

func asValidation(t *testing.T, err error) *ValidationError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %T: %v", err, err)
	}
	return ve
}
