package deptest

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Every process runs the initialiser of every package linked into its
// binary before main, whatever the command. So the commands that only talk
// to a running supervisor (an agent's every command, the operator's send)
// run in the swarm front, which links none of the supervisor's, the
// engines' or the stores' dependencies, and each binary has a budget on
// what its initialisers allocate, which GODEBUG=inittrace=1 reports
// exactly (their clock time only follows from it, and is too noisy to
// test).

// StartupBudget is one binary's budget.
type StartupBudget struct {
	Pkg        string // the main package, relative to the module
	PerPackage int64  // the most one package's initialiser may allocate
	Total      int64  // the most all of them may allocate together
	// Exceptions are the packages allowed past PerPackage, each with its
	// own ceiling and the reason it cannot be made lazy. Add one only
	// with a reason that holds.
	Exceptions map[string]InitException
	MinInits   int // fewer lines than this: the trace was not read
}

// Startups are the budgets, the front's first.
var Startups = []StartupBudget{
	{
		// 24 KB in 47 initialisers when it was set, 11.4 KB of it the
		// largest (unicode's tables); swarmd allocates 45 times that.
		Pkg: "cmd/swarm", PerPackage: 16 << 10, Total: 48 << 10, MinInits: 20,
	},
	{
		Pkg: "cmd/swarmd", PerPackage: InitBudget, Total: InitTotalBudget,
		Exceptions: InitExceptions, MinInits: 50,
	},
}

// InitBudget is the most a single package's initialiser in swarmd may
// allocate.
const InitBudget = 64 << 10

// InitTotalBudget is the most all of swarmd's initialisers together may
// allocate:
// 1.12 MB measured when it was set (2.9 MB before the protocol's schemas
// left santhosh-tekuri/jsonschema/v6, 3.7 MB before OpenCensus left the
// binary), plus a margin for a few small packages.
const InitTotalBudget = 1280 << 10

// InitExceptions are the packages allowed past InitBudget, each with its
// own ceiling and the reason it cannot be made lazy. Add one only with a
// reason that holds.
var InitExceptions = map[string]InitException{
	"github.com/google/go-cmp/cmp": {
		Max:    192 << 10,
		Reason: "google.golang.org/genai imports it outside its tests (replay_api_client.go); its init compiles Unicode regexps",
	},
	"github.com/google/jsonschema-go/jsonschema": {
		Max:    96 << 10,
		Reason: "the MCP SDK's schemas (swarm mcp) and protocol's (read on first use); upstream's package variables",
	},
}

// InitException is a package's own allocation ceiling and why it has one.
type InitException struct {
	Max    int64
	Reason string
}

// Init is one line of GODEBUG=inittrace=1.
type Init struct {
	Pkg    string
	Bytes  int64
	Allocs int64
}

var initLine = regexp.MustCompile(`^init (\S+) @[0-9.]+ ms, [0-9.]+ ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

// ParseInitTrace reads the init lines of a GODEBUG=inittrace=1 run and
// ignores the rest of the output.
func ParseInitTrace(r io.Reader) ([]Init, error) {
	var out []Init
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := initLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		b, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inittrace: %q: %w", sc.Text(), err)
		}
		a, err := strconv.ParseInt(m[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inittrace: %q: %w", sc.Text(), err)
		}
		out = append(out, Init{Pkg: m[1], Bytes: b, Allocs: a})
	}
	return out, sc.Err()
}

// CheckStartup returns one line per initialiser over b's budget, and one
// for the total, naming what to do.
func CheckStartup(b StartupBudget, inits []Init) []string {
	var bad []string
	var total int64
	for _, in := range inits {
		total += in.Bytes
		limit := b.PerPackage
		if ex, ok := b.Exceptions[in.Pkg]; ok {
			limit = ex.Max
		}
		if in.Bytes > limit {
			bad = append(bad, fmt.Sprintf("init %s allocates %d bytes (%d allocs), over its budget of %d: make it lazy (sync.OnceValue on first use) or keep the package out of %s",
				in.Pkg, in.Bytes, in.Allocs, limit, b.Pkg))
		}
	}
	if total > b.Total {
		top := slices.Clone(inits)
		slices.SortFunc(top, func(a, b Init) int { return int(b.Bytes - a.Bytes) })
		var names []string
		for _, in := range top[:min(5, len(top))] {
			names = append(names, fmt.Sprintf("%s %d", in.Pkg, in.Bytes))
		}
		bad = append(bad, fmt.Sprintf("%s's initialisers allocate %d bytes in all, over the budget of %d; the largest: %s",
			b.Pkg, total, b.Total, strings.Join(names, ", ")))
	}
	return bad
}
