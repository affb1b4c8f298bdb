package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestPlanFDLimit(t *testing.T) {
	const inf = math.MaxUint64
	need500 := fdsNeeded(500) // 5,064
	for _, c := range []struct {
		name       string
		agents     int
		soft, hard uint64
		raise      uint64
		refuse     bool
	}{
		{"enough already", 500, 8192, 8192, 0, false},
		{"exactly enough", 500, need500, need500, 0, false},
		{"soft short, hard enough: raise to the hard limit", 500, 1024, 65536, 65536, false},
		{"soft short, hard unlimited: raise to what is needed", 500, 1024, inf, need500, false},
		{"ulimit -n 1024 (both): refuse", 500, 1024, 1024, 0, true},
		{"hard one short: refuse", 500, 1024, need500 - 1, 0, true},
		{"a few agents fit the usual 1024", 20, 1024, 1024, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			raise, err := planFDLimit(c.agents, c.soft, c.hard)
			if raise != c.raise {
				t.Errorf("raise = %d, want %d", raise, c.raise)
			}
			var fe *fdLimitError
			if got := errors.As(err, &fe); got != c.refuse {
				t.Fatalf("err = %v, want refusal %v", err, c.refuse)
			}
			if c.refuse {
				msg := err.Error()
				for _, want := range []string{"500 agents need up to 5064 open files", "ulimit -n 5064", "--agents"} {
					if !strings.Contains(msg, want) {
						t.Errorf("refusal %q lacks %q", msg, want)
					}
				}
			}
		})
	}
}
