package merge

import (
	"math"
	"slices"
	"testing"
)

func TestTable(t *testing.T) {
	for _, c := range []struct {
		from State
		ev   Event
		to   State
		ok   bool
	}{
		{"", Enqueue, Queued, true}, {Queued, Claim, Testing, true}, {Testing, Land, Landed, true},
		{Testing, Conflicts, Conflict, true}, {Testing, Fail, Failed, true}, {Testing, Retest, Queued, true},
		{Queued, Cancel, Cancelled, true}, {Testing, Cancel, Cancelled, true},
		{Queued, Land, Landed, false}, {Landed, Retest, Queued, false}, {Failed, Claim, Testing, false}, {Cancelled, Claim, Testing, false},
	} {
		if err := Table.Check(c.from, c.ev, c.to); (err == nil) != c.ok {
			t.Errorf("%s --%s--> %s: %v, want ok=%v", c.from, c.ev, c.to, err, c.ok)
		}
	}
	for _, s := range States {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
}

// TestBisect: 8 candidates with one bad at each position: 7 land, the bad
// one is named, and the runs beyond the first batch, counting the rest's
// own batch, stay within 1 + ceil(log2 8) + 1.
func TestBisect(t *testing.T) {
	const n = 8
	limit := 1 + int(math.Ceil(math.Log2(n))) + 1
	for bad := 0; bad < n; bad++ {
		landed := map[int]bool{}
		b := Bisect(n, func(lo, hi int) Tested {
			for i := lo; i < hi; i++ {
				if !landed[i] && i == bad {
					return Tested{}
				}
			}
			for i := lo; i < hi; i++ {
				landed[i] = true
			}
			return Tested{Pass: true}
		})
		runs := b.Runs
		if len(b.Rest) > 0 {
			runs++ // the rest, tested as a batch of its own, passes
			for _, i := range b.Rest {
				landed[i] = true
			}
		}
		if b.Bad != bad || len(landed) != n-1 || landed[bad] {
			t.Errorf("bad at %d: %+v, landed %v", bad, b, landed)
		}
		if runs > limit {
			t.Errorf("bad at %d: %d runs, want <= %d", bad, runs, limit)
		}
		if !slices.IsSorted(b.Landed) {
			t.Errorf("bad at %d: landed out of order %v", bad, b.Landed)
		}
	}
}

func TestBisectOneAndAbort(t *testing.T) {
	if b := Bisect(1, func(lo, hi int) Tested { t.Fatal("a batch of one needs no run"); return Tested{} }); b.Bad != 0 || b.Runs != 0 || len(b.Rest) != 0 {
		t.Fatalf("one: %+v", b)
	}
	b := Bisect(4, func(lo, hi int) Tested { return Tested{Abort: true} })
	if b.Bad != -1 || !slices.Equal(b.Rest, []int{0, 1, 2, 3}) || b.Runs != 1 {
		t.Fatalf("abort: %+v", b)
	}
}
