package swarm

import (
	"fmt"
	"slices"
	"testing"
)

func TestTeammatesAreCapped(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	for _, tc := range []struct {
		self  string
		limit int
		want  []string
		more  int
	}{
		{"a", 10, []string{"b", "c", "d"}, 0},
		{"c", 10, []string{"a", "b", "d"}, 0},
		{"a", 2, []string{"b", "c"}, 1},
		{"d", 2, []string{"a", "b"}, 1}, // self is beyond the cut: not counted
		{"b", 2, []string{"a", "c"}, 1},
		{"x", 3, []string{"a", "b", "c"}, 1},
	} {
		got, more := teammates(names, tc.self, tc.limit)
		if !slices.Equal(got, tc.want) || more != tc.more {
			t.Errorf("teammates(%s, %d) = %v, %d; want %v, %d", tc.self, tc.limit, got, more, tc.want, tc.more)
		}
	}
	if names[0] != "a" || len(names) != 4 {
		t.Fatalf("names changed: %v", names)
	}
}

// A prompt request reads only the first teammates: building one for each of
// 10,000 agents must not copy the whole list each time.
func TestPromptRequestsOfABigSwarm(t *testing.T) {
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%05d", i)
	}
	allocs := testing.AllocsPerRun(5, func() {
		for _, n := range names[len(names)-100:] {
			teammates(names, n, maxTeammates)
		}
	})
	// One growing slice per call, never a copy of 10,000 names.
	if allocs > 100*8 {
		t.Fatalf("%v allocations for 100 requests", allocs)
	}
	got, more := teammates(names, names[9999], maxTeammates)
	if len(got) != maxTeammates || more != 10000-1-maxTeammates {
		t.Fatalf("got %d named and %d more", len(got), more)
	}
}
