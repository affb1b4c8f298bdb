package fsm_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/swarmhq/swarm/fsm"
)

type state string
type event string

func door() *fsm.Table[state, event] {
	t := fsm.NewTable[state, event]("door")
	t.Add("", "install", "closed")
	t.Add("closed", "open", "open")
	t.Add("open", "close", "closed")
	t.Add("closed", "lock", "locked")
	t.Add("locked", "unlock", "closed")
	t.Add("closed", "kick", "open").Add("closed", "kick", "broken", "open") // extends, no duplicate
	return t
}

func TestTableConstruction(t *testing.T) {
	d := door()
	for _, c := range []struct {
		from state
		ev   event
		want []state
	}{
		{"", "install", []state{"closed"}},
		{"closed", "open", []state{"open"}},
		{"closed", "kick", []state{"open", "broken"}},
		{"open", "lock", nil},
		{"locked", "open", nil},
		{"nowhere", "open", nil},
	} {
		if got := d.Next(c.from, c.ev); !slices.Equal(got, c.want) {
			t.Errorf("Next(%q, %q) = %v, want %v", c.from, c.ev, got, c.want)
		}
	}
	// Next hands out a copy: changing it leaves the table alone.
	got := d.Next("closed", "kick")
	got[0] = "gone"
	if err := d.Check("closed", "kick", "open"); err != nil {
		t.Errorf("the table changed through Next's result: %v", err)
	}
}

func TestCheckLegalAndIllegal(t *testing.T) {
	d := door()
	for _, legal := range [][3]string{{"", "install", "closed"}, {"closed", "kick", "broken"}, {"locked", "unlock", "closed"}} {
		if err := d.Check(state(legal[0]), event(legal[1]), state(legal[2])); err != nil {
			t.Errorf("Check(%v) = %v", legal, err)
		}
	}
	for _, illegal := range [][3]string{{"open", "lock", "locked"}, {"closed", "open", "closed"}, {"", "open", "open"}, {"locked", "kick", "broken"}} {
		err := d.Check(state(illegal[0]), event(illegal[1]), state(illegal[2]))
		var ie *fsm.IllegalTransitionError
		if !errors.As(err, &ie) {
			t.Fatalf("Check(%v) = %v, want an IllegalTransitionError", illegal, err)
		}
		if ie.Machine != "door" || ie.From != illegal[0] || ie.Event != illegal[1] || ie.To != illegal[2] {
			t.Errorf("error fields = %+v", *ie)
		}
	}
	err := d.Check("open", "lock", "locked")
	if want := "illegal door transition open --lock--> locked"; err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}
}

// fakeTx is a store's transaction in memory: a compare-and-set of each
// subject's state, and the events it recorded.
type fakeTx struct {
	states  map[string]string
	changes []fsm.Change
	fail    error
}

var errConflict = errors.New("state changed underneath")

func (f *fakeTx) Transition(c fsm.Change) (fsm.Event, error) {
	f.changes = append(f.changes, c)
	if f.fail != nil {
		return fsm.Event{}, f.fail
	}
	if f.states[c.Subject] != c.From {
		return fsm.Event{}, errConflict
	}
	f.states[c.Subject] = c.To
	ev := fsm.Event{ID: int64(len(f.changes)), SubjectKind: c.Kind, Subject: c.Subject, To: c.To, Cause: c.Cause, SessionSeq: c.Seq}
	if c.From != "" {
		from := c.From
		ev.From = &from
	}
	if c.By != "" {
		by := c.By
		ev.Agent = &by
	}
	return ev, nil
}

func TestApplyChecksThenCompareAndSets(t *testing.T) {
	d := door()
	tx := &fakeTx{states: map[string]string{}}
	ev, err := fsm.Apply(tx, d, fsm.SubjectItem, "front", "", "install", "closed", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev.To != "closed" || ev.From != nil || ev.Cause != "install" { // an empty cause is the event
		t.Errorf("event = %+v", ev)
	}
	ev, err = fsm.Apply(tx, d, fsm.SubjectAgent, "front", "closed", "open", "open", "the wind", 7)
	if err != nil {
		t.Fatal(err)
	}
	if ev.From == nil || *ev.From != "closed" || ev.Cause != "the wind" || ev.SessionSeq != 7 {
		t.Errorf("event = %+v", ev)
	}
	want := fsm.Change{Kind: fsm.SubjectAgent, Subject: "front", From: "closed", To: "open", Cause: "the wind", Seq: 7}
	if got := tx.changes[1]; got != want {
		t.Errorf("change = %+v, want %+v", got, want)
	}

	// An illegal transition never reaches the store.
	n := len(tx.changes)
	if _, err := fsm.Apply(tx, d, fsm.SubjectItem, "front", "open", "lock", "locked", "", 0); err == nil {
		t.Fatal("open --lock--> locked was applied")
	}
	if len(tx.changes) != n {
		t.Errorf("an illegal transition reached the store: %+v", tx.changes[n:])
	}

	// A legal transition from a state the subject left is the store's
	// compare-and-set failing: its error comes back unchanged.
	if _, err := fsm.Apply(tx, d, fsm.SubjectItem, "front", "closed", "lock", "locked", "", 0); !errors.Is(err, errConflict) {
		t.Errorf("stale from: err = %v, want the store's conflict", err)
	}
	if tx.states["front"] != "open" {
		t.Errorf("state = %q after a failed compare-and-set", tx.states["front"])
	}
	tx.fail = errors.New("disk on fire")
	if _, err := fsm.Apply(tx, d, fsm.SubjectItem, "front", "open", "close", "closed", "", 0); !errors.Is(err, tx.fail) {
		t.Errorf("err = %v, want the store's", err)
	}
}

func TestApplyByKeepsWhoTriggered(t *testing.T) {
	tx := &fakeTx{states: map[string]string{"T-1": "closed"}}
	ev, err := fsm.ApplyBy(tx, door(), fsm.SubjectItem, "T-1", "closed", "lock", "locked", "", "operator")
	if err != nil {
		t.Fatal(err)
	}
	if ev.AgentName() != "operator" || ev.Cause != "lock" {
		t.Errorf("event = %+v", ev)
	}
	want := fsm.Change{Kind: fsm.SubjectItem, Subject: "T-1", From: "closed", To: "locked", Cause: "lock", By: "operator"}
	if tx.changes[0] != want {
		t.Errorf("change = %+v, want %+v", tx.changes[0], want)
	}
	if _, err := fsm.ApplyBy(tx, door(), fsm.SubjectItem, "T-1", "locked", "open", "open", "", "operator"); err == nil || len(tx.changes) != 1 {
		t.Errorf("illegal ApplyBy: err %v, changes %d", err, len(tx.changes))
	}
}

// The events' JSON names are what `swarm events --json` prints.
func TestEventJSON(t *testing.T) {
	from, agent := "Idle", "backend"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		ev   fsm.Event
		want string
	}{
		{fsm.Event{ID: 3, At: at, SubjectKind: fsm.SubjectAgent, Subject: "backend", Agent: &agent, From: &from, To: "Running", Cause: "mail", SessionSeq: 4},
			`{"id":3,"at":"2026-01-02T03:04:05Z","subject_kind":"agent","subject":"backend","agent":"backend","from":"Idle","to":"Running","cause":"mail","session_seq":4}`},
		{fsm.Event{ID: 1, At: at, SubjectKind: fsm.SubjectTeam, Subject: "core", To: "INIT", Cause: "Create"},
			`{"id":1,"at":"2026-01-02T03:04:05Z","subject_kind":"team","subject":"core","agent":null,"from":null,"to":"INIT","cause":"Create","session_seq":0}`},
	} {
		b, err := json.Marshal(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("JSON =\n%s\nwant\n%s", b, c.want)
		}
	}
	if (fsm.Event{}).AgentName() != "" {
		t.Error("AgentName of an event without one is not empty")
	}
}

func TestSubjectKinds(t *testing.T) {
	for _, k := range fsm.SubjectKinds {
		if !k.Valid() {
			t.Errorf("%q is not valid", k)
		}
	}
	if fsm.SubjectKind("session").Valid() || fsm.SubjectKind("").Valid() {
		t.Error("an unknown kind is valid")
	}
}
