package deptest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// Doors call only verbs (DESIGN §13.1): the CLI, `swarm mcp`, the live
// view, the web desk and the engines' tools reach a use case through
// package verbs, which checks who is asking. A door may still name the
// supervisor's runtime in package swarm — building and running it, its
// options, the results its runtime verbs return — but only the names in
// RuntimeNames; any other reference to package swarm from a door is a use
// case called around the verbs.

// DoorPrefixes are the door packages' directories.
var DoorPrefixes = []string{"cmd/swarm/", "cmd/swarmd/", "internal/front/", "web/", "tui/", "engine/"}

// RuntimeNames are the names of package swarm a door may use, each with
// why it is runtime, not a use case.
var RuntimeNames = map[string]string{
	// The supervisor itself: built, wired and run by `swarm up`.
	"New": "builds the supervisor", "Options": "the supervisor's options", "Supervisor": "the runtime",
	"EngineFactory": "wires the engines", "GitWorktrees": "wires the worktrees", "NewPipePrompts": "wires the prompts",
	"NewBeadsTasks": "wires the queue's tasks", "NewMergeQueue": "wires the merge queue", "MergeQueue": "the merge queue the merge verbs land through",
	"Protocol": "the protocol service the protocol verbs take", "Verbs": "the port the binary fills with the verbs", "Runtime": "what the runtime verbs run on", "SendRequest": "verbs.SendRequest", "Raise": "the Protocol's hook for a branch_violation, raised by the runtime's rule",
	"ErrShutdown": "the supervisor's end", "RecoverWorktrees": "recovery at start", "WhileAway": "recovery at start",
	"RecordSettings": "trusted settings at start", "ChangedSettings": "trusted settings at start", "SettingChange": "trusted settings at start",
	"AcquireLock": "the supervisor's lock", "LockHolder": "the supervisor's lock", "ThisHolder": "the supervisor's lock", "LiveHolders": "the supervisors' leases, as send reports them",
	"HandleDoor": "the door's own rules, for the testscript door",
	// What the runtime verbs take and return (verbs.Down, Pause, Reload, Spawn).
	"DownMode": "verbs.Down's request", "DownKeep": "verbs.Down's request", "DownMerge": "verbs.Down's request",
	"DownSquash": "verbs.Down's request", "DownDiscard": "verbs.Down's request", "DownRequest": "verbs.Down's request",
	"DownResult": "verbs.Down's result", "DownAgent": "verbs.Down's result", "DiscardPlan": "verbs.Down's confirmation",
	"ErrNotConfirmed": "verbs.Down's answer", "ReloadReport": "verbs.Reload's result", "PauseNow": "verbs.Pause's effect",
	"PauseAlready": "verbs.Pause's effect", "PauseCancelled": "verbs.Pause's effect", "Resumed": "verbs.Resume's effect",
	"ErrNotPaused": "verbs.Resume's answer", "StartSpawned": "the runtime starts a spawned agent after verbs.Spawn",
	"NextSession": "doctor's look at the runtime's sessions",
	// Words, not use cases.
	"USD": "formats dollars", "MessageNumber": "reads #12", "ResolveMessage": "finds #12 or a msg_id: a read of the store, as the doors' other reads", "GlobHelp": "the help text of a glob", "WithSpawned": "the stored agents added to swarm.toml on open",
}

// CheckDoors returns every reference a door's production source makes to
// package swarm outside RuntimeNames, with its file:line.
func CheckDoors(files []File) []Violation {
	var out []Violation
	for _, f := range files {
		if strings.HasSuffix(f.Path, "_test.go") || !strings.HasSuffix(f.Path, ".go") || !hasAnyPrefix(f.Path, DoorPrefixes) {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f.Path, f.Src, parser.SkipObjectResolution)
		if err != nil {
			out = append(out, Violation{Pkg: f.Path, Import: "(unparsable)", Rule: err.Error()})
			continue
		}
		name := ""
		for _, im := range file.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == Module+"/swarm" {
				name = "swarm"
				if im.Name != nil {
					name = im.Name.Name
				}
			}
		}
		if name == "" {
			continue
		}
		var found []Violation
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
				if _, ok := RuntimeNames[sel.Sel.Name]; !ok {
					at := fmt.Sprintf("%s:%d", f.Path, fset.Position(sel.Pos()).Line)
					found = append(found, Violation{Pkg: at, Import: "swarm." + sel.Sel.Name,
						Rule: "a door calls a use case through package verbs, which checks the caller (DESIGN §13.1); package swarm is the runtime's (internal/deptest RuntimeNames)"})
				}
			}
			return true
		})
		sort.SliceStable(found, func(i, j int) bool { return found[i].Pkg < found[j].Pkg })
		out = append(out, found...)
	}
	return out
}
