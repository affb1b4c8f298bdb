package promptpipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/mode"
)

// graph reads a `bd list --json` graph (a copy of beads/testdata/graph).
func graph(t testing.TB, name string) []beads.Issue {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	issues, err := beads.ParseReady(b)
	if err != nil {
		t.Fatal(err)
	}
	return issues
}

func TestTaskPlanGoldens(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec mode.Spec
		file string
		want string
	}{
		{"dag", mode.Spec{Mode: mode.CoordinateMode, Strategy: mode.DAG}, "graph.json",
			"### Layers\n" + "Open tasks in dependency order: hand out a whole layer at once, in parallel; a layer waits for the ones before it.\n" +
				"Layer 1: demo-x9, demo-e1.1\nLayer 2: demo-e1.2, demo-e1.3\nLayer 3: demo-e1.4"},
		{"dag_cycle", mode.Spec{Mode: mode.CoordinateMode, Strategy: mode.DAG}, "graph_cycle.json", "Cycle: demo-c1, demo-c2, demo-c3 block each other"},
		{"intelligent-batching", mode.Spec{Mode: mode.CoordinateMode, Strategy: mode.IntelligentBatching}, "graph.json", "### Batches\n"},
		{"tree", mode.Spec{Mode: mode.ExecuteMode, Strategy: mode.Tree, TreeRoot: "demo-e1"}, "graph.json", "1. demo-e1.1: [open] P1 task: A: payment API\n2. demo-e1.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := freshContext()
			pc.Mode, pc.Strategy, pc.TreeRoot, pc.Beads = tc.spec.Mode, tc.spec.Strategy, tc.spec.TreeRoot, true
			g := graph(t, tc.file)
			p := Render(pc, Sources{Env: env(), Tasks: g[:1], Graph: g, HasGraph: true}, defaultConfig, now)
			s, ok := p.Section(SecTasks)
			if !ok || !strings.Contains(s.Body, tc.want) {
				t.Fatalf("section 13 lacks %q:\n%s", tc.want, s.Body)
			}
			checkGolden(t, "sections/13_plan_"+tc.name+".golden", s.Body+"\n")
		})
	}
	// Other strategies show no plan, even with a graph.
	pc := freshContext()
	g := graph(t, "graph.json")
	p := Render(pc, Sources{Env: env(), Graph: g, HasGraph: true}, defaultConfig, now)
	if _, ok := p.Section(SecTasks); ok {
		t.Fatal("execute/simple got a plan")
	}
}
