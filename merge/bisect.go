package merge

// Bisection of a failing batch (DESIGN §14). The queue tested a batch as a
// whole and [merge] ci failed; with one bad candidate, testing halves
// finds it in about log2(n) more runs, and every good candidate before it
// lands on the way: a passing prefix lands at once, so the base the next
// half is tested on holds it, as the whole batch's test did.

// Tested is what one test of a part of the batch found: Pass when CI
// passed (the caller landed that part), Abort when the test could not
// decide (the base moved, a conflict appeared): the bisection stops and
// what was not landed goes back to the queue.
type Tested struct {
	Pass  bool
	Abort bool
}

// Bisection is what Bisect found, as indexes into the batch.
type Bisection struct {
	Landed []int // tested good and landed, in order
	Bad    int   // the candidate the failure is pinned on; -1 when aborted
	// Rest were after the bad one, or not reached when aborted: back to
	// the queue, to be tested again as a batch of their own.
	Rest []int
	Runs int // tests Bisect ran (the failing whole batch not counted)
}

// Bisect narrows down the failing batch of n candidates (n >= 1; the
// batch as a whole failed already). test(lo, hi) tests candidates
// [lo, hi) on the current base and, when they pass, the caller lands them
// before returning. A batch of one is bad without another run.
func Bisect(n int, test func(lo, hi int) Tested) Bisection {
	b := Bisection{Bad: -1}
	lo, hi := 0, n // [lo, hi) fails on the current base
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		b.Runs++
		r := test(lo, mid)
		switch {
		case r.Abort:
			b.Rest = span(lo, n)
			return b
		case r.Pass:
			b.Landed = append(b.Landed, span(lo, mid)...)
			lo = mid
		default:
			hi = mid
		}
	}
	b.Bad = lo
	b.Rest = span(lo+1, n)
	return b
}

func span(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}
