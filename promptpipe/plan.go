package promptpipe

import (
	"fmt"
	"strings"

	"github.com/swarmhq/swarm/beads"
	"github.com/swarmhq/swarm/mode"
)

// batchSize caps a batch of intelligent batching: more than this many
// tasks handed out at once is hard to follow up.
const batchSize = 5

// taskPlan is section 13's plan for the strategies that plan from the task
// graph (bd list): `### Layers` for dag, `### Batches` for intelligent
// batching (beads.Layers and beads.Batches), and `### Task Tree` for
// execute/tree (beads.Subtree under tree_root, in dependency order, with
// the reporting commands per subtask). A cycle is reported, never looped
// on. Empty when there is no graph.
func taskPlan(pc PromptContext, src Sources) string {
	if !src.HasGraph {
		return ""
	}
	s := pc.Spec()
	var b strings.Builder
	switch s.EffectiveStrategy() {
	case mode.DAG:
		p := beads.Layers(src.Graph)
		if len(p.Groups) == 0 && len(p.Cycle) == 0 {
			return ""
		}
		b.WriteString("### Layers\nOpen tasks in dependency order: hand out a whole layer at once, in parallel; a layer waits for the ones before it.\n")
		writeGroups(&b, "Layer", p)
	case mode.IntelligentBatching:
		p := beads.Batches(src.Graph, batchSize)
		if len(p.Groups) == 0 && len(p.Cycle) == 0 {
			return ""
		}
		b.WriteString("### Batches\nOpen tasks grouped so that nothing in a batch depends on another task of it: hand out a batch at once; the next when it is done.\n")
		writeGroups(&b, "Batch", p)
	case mode.Tree:
		if s.TreeRoot == "" {
			return ""
		}
		sub := beads.Subtree(src.Graph, s.TreeRoot)
		fmt.Fprintf(&b, "### Task Tree\nYour tree under %s, in dependency order: take them one at a time, top to bottom.\n", s.TreeRoot)
		if len(sub) == 0 {
			b.WriteString("No open subtask is left: report the session and end it.\n")
			return b.String()
		}
		byID := map[string]beads.Issue{}
		for _, i := range sub {
			byID[i.ID] = i
		}
		p := beads.Layers(sub)
		n := 0
		for _, g := range p.Groups {
			for _, id := range g {
				n++
				t := byID[id]
				fmt.Fprintf(&b, "%d. %s: [%s] P%d %s: %s\n", n, id, t.Status, t.Priority, t.IssueType, title(t.Title))
			}
		}
		if len(p.Cycle) > 0 {
			fmt.Fprintf(&b, "Cycle: %s block each other, so none can start; tell your coordinator.\n", strings.Join(p.Cycle, ", "))
		}
		if v := pc.Vector(); v.Has(mode.CanReportTaskLevel) {
			b.WriteString("Per subtask: `swarm report progress <id> \"<message>\"` as it moves, `swarm report complete <id> \"<what was done>\"` when closed, `swarm report blocked <id> \"<why>\"` when stuck.\n")
		}
	}
	return b.String()
}

func writeGroups(b *strings.Builder, label string, p beads.Plan) {
	for i, g := range p.Groups {
		fmt.Fprintf(b, "%s %d: %s\n", label, i+1, strings.Join(g, ", "))
	}
	if len(p.Cycle) > 0 {
		fmt.Fprintf(b, "Cycle: %s block each other (or wait on tasks that do), so none can start until a dependency is removed.\n", strings.Join(p.Cycle, ", "))
	}
}
