package message

import (
	"cmp"
	"slices"
)

// TreeRow is one message of a thread in reading order, with the prefix
// that draws the tree: "" for the first message, "├─ " or "└─ " for a
// reply, under "│  " or "   " for each level above it.
type TreeRow struct {
	Message Message
	Depth   int
	Prefix  string
}

// Tree orders a thread's messages (any order) depth-first, each reply
// under the message it answers and replies to one message oldest first.
// A message whose parent is not among them (pruned) starts a tree of
// its own, in id order.
func Tree(ms []Message) []TreeRow {
	byID := make(map[int64]bool, len(ms))
	for _, m := range ms {
		byID[m.ID] = true
	}
	sorted := slices.Clone(ms)
	slices.SortFunc(sorted, func(a, b Message) int { return cmp.Compare(a.ID, b.ID) })
	children := map[int64][]Message{}
	var roots []Message
	for _, m := range sorted {
		if m.ReplyTo != nil && byID[*m.ReplyTo] && *m.ReplyTo != m.ID {
			children[*m.ReplyTo] = append(children[*m.ReplyTo], m)
		} else {
			roots = append(roots, m)
		}
	}
	out := make([]TreeRow, 0, len(ms))
	var walk func(m Message, depth int, indent, branch string)
	walk = func(m Message, depth int, indent, branch string) {
		out = append(out, TreeRow{Message: m, Depth: depth, Prefix: indent + branch})
		kids := children[m.ID]
		next := indent
		switch branch {
		case "├─ ":
			next += "│  "
		case "└─ ":
			next += "   "
		}
		for i, k := range kids {
			b := "├─ "
			if i == len(kids)-1 {
				b = "└─ "
			}
			walk(k, depth+1, next, b)
		}
	}
	for _, r := range roots {
		walk(r, 0, "", "")
	}
	return out
}
