package beads

import (
	"cmp"
	"slices"
	"strings"
)

// Plan is an order of open issues by their blocking dependencies.
type Plan struct {
	// Groups are layers (or batches) in order: nothing in a group depends
	// on anything in it or after it. Ids within a group are by priority,
	// then id.
	Groups [][]string
	// Cycle lists, sorted, the issues that block each other in a loop (and
	// those waiting on them): they can never start until a dependency goes.
	Cycle []string
}

// Layers orders issues topologically by their "blocks" dependencies (Kahn's
// algorithm): layer 1 has no open blocker, layer n waits only on layers
// before it. A blocker outside issues (closed, or not listed) is done.
// Epics and parent-child edges do not order work. It is pure and
// deterministic, and never loops on a cycle: the issues left are Cycle.
func Layers(issues []Issue) Plan {
	byID := make(map[string]Issue, len(issues))
	for _, i := range issues {
		if !i.IsEpic() {
			byID[i.ID] = i
		}
	}
	blockers := map[string]map[string]bool{} // id -> open blockers
	dependents := map[string][]string{}
	for id, i := range byID {
		for _, d := range i.Dependencies {
			if d.Type != DepBlocks || d.IssueID != id || d.DependsOnID == id {
				continue
			}
			if _, open := byID[d.DependsOnID]; !open || blockers[id][d.DependsOnID] {
				continue
			}
			if blockers[id] == nil {
				blockers[id] = map[string]bool{}
			}
			blockers[id][d.DependsOnID] = true
			dependents[d.DependsOnID] = append(dependents[d.DependsOnID], id)
		}
	}
	order := func(ids []string) {
		slices.SortFunc(ids, func(a, b string) int {
			return cmp.Or(cmp.Compare(byID[a].Priority, byID[b].Priority), strings.Compare(a, b))
		})
	}
	var plan Plan
	var layer []string
	for id := range byID {
		if len(blockers[id]) == 0 {
			layer = append(layer, id)
		}
	}
	placed := 0
	for len(layer) > 0 {
		order(layer)
		plan.Groups = append(plan.Groups, layer)
		placed += len(layer)
		var next []string
		for _, id := range layer {
			for _, dep := range dependents[id] {
				delete(blockers[dep], id)
				if len(blockers[dep]) == 0 {
					next = append(next, dep)
				}
			}
		}
		layer = next
	}
	if placed < len(byID) {
		for id := range byID {
			if len(blockers[id]) > 0 {
				plan.Cycle = append(plan.Cycle, id)
			}
		}
		slices.Sort(plan.Cycle)
	}
	return plan
}

// Batches is Layers for intelligent batching: the same order, with a layer
// larger than max split into batches of at most max (0: no limit), so each
// batch is work that can be handed out at once with no dependency inside.
func Batches(issues []Issue, max int) Plan {
	p := Layers(issues)
	if max <= 0 {
		return p
	}
	var groups [][]string
	for _, g := range p.Groups {
		for len(g) > max {
			groups = append(groups, g[:max])
			g = g[max:]
		}
		groups = append(groups, g)
	}
	p.Groups = groups
	return p
}

// Subtree returns root's descendants by parent-child edges (the parent
// field, or a parent-child dependency), root left out, in issues' order.
func Subtree(issues []Issue, root string) []Issue {
	children := map[string][]string{}
	for _, i := range issues {
		parents := map[string]bool{}
		if i.Parent != "" {
			parents[i.Parent] = true
		}
		for _, d := range i.Dependencies {
			if d.Type == DepParentChild && d.IssueID == i.ID {
				parents[d.DependsOnID] = true
			}
		}
		for p := range parents {
			children[p] = append(children[p], i.ID)
		}
	}
	in := map[string]bool{}
	queue := []string{root}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, c := range children[id] {
			if !in[c] && c != root {
				in[c] = true
				queue = append(queue, c)
			}
		}
	}
	var out []Issue
	for _, i := range issues {
		if in[i.ID] {
			out = append(out, i)
		}
	}
	return out
}
