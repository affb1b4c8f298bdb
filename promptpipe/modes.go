package promptpipe

import (
	"fmt"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/mode"
)

// ModeInstructions is section 3, the one renderer of the mode contract
// (DESIGN §9.4): the mode and strategy, the strategy's phases, the
// capabilities that are on, the tools the vector grants (the list the
// engines enforce) and, for each capability on, the exact command lines
// the agent may run (the lines the swarm tool and the swarm commands
// allow). Nothing the vector refuses is named. beads reports whether bd is
// installed, which adds the beads tools and commands.
func ModeInstructions(s mode.Spec, v mode.Vector, beads bool) string {
	return ModeInstructionsFor(s, v, beads, nil)
}

// ModeInstructionsFor is ModeInstructions for a session run by an external
// CLI (cli non-nil): its tools are the CLI's own as swarm limited them, and
// the swarm MCP server's, and nothing the CLI cannot keep off is claimed.
func ModeInstructionsFor(s mode.Spec, v mode.Vector, beads bool, cli *mode.CLITools) string {
	if v == nil {
		v = s.Vector()
	}
	var b strings.Builder
	strategy := s.EffectiveStrategy()
	fmt.Fprintf(&b, "Mode: %s · strategy: %s", s.Kind(), strategy)
	if p := s.Profile(); p != "" {
		fmt.Fprintf(&b, " · profile: %s", p)
	}
	b.WriteString("\n")
	b.WriteString(modeIntro(s, v, cli) + "\n")

	b.WriteString("Phases:\n")
	for i, ph := range phases(s, v) {
		fmt.Fprintf(&b, "%d. %s\n", i+1, ph)
	}
	for _, r := range modeRules(s, v) {
		b.WriteString("- " + r + "\n")
	}

	// Only what the agent can use now: a capability with no tool and no
	// built command (bd's without bd) is left out here, though the vector
	// keeps it. One with a line of commands below is named there only,
	// which keeps the base prompt within its budget.
	shell := true // the commands below can be run as commands
	if cli != nil {
		shell = cli.Shell && cli.ShellNote == ""
	}
	var cb strings.Builder
	listed := map[mode.Capability]bool{}
	cmds := v.Commands(beads)
	if len(cmds) > 0 {
		switch {
		case cli == nil:
			via := "the `swarm` tool (argv as a list, no shell)"
			if v.Has(mode.CanRunCommands) {
				via += " or bash"
			}
			fmt.Fprintf(&cb, "Commands, run through %s; any other is refused:\n", via)
		case shell:
			cb.WriteString("Commands, run through your shell; any other swarm command is refused:\n")
		default:
			cb.WriteString("You cannot run these commands yourself: the MCP tools of the same names run the swarm ones for you.\n")
		}
		var group []string
		flush := func(c mode.Capability, label string) {
			if len(group) > 0 {
				fmt.Fprintf(&cb, "- %s: %s\n", label, strings.Join(group, "; "))
				listed[c] = true
			}
			group = group[:0]
		}
		// Reads anyone may run come last; the rest one line per capability.
		add := func(cmd mode.Command) {
			// Without a shell, bd's lines name nothing the agent can run.
			if shell || strings.HasPrefix(cmd.Syntax, "swarm ") {
				group = append(group, "`"+cmd.Syntax+"`")
			}
		}
		for _, c := range mode.Capabilities {
			for _, cmd := range v.CommandsFor(c, beads) {
				add(cmd)
			}
			flush(c, string(c))
		}
		for _, cmd := range v.CommandsFor("", beads) {
			add(cmd)
		}
		flush("", "anyone")
	}
	var on []string
	for _, c := range v.Enabled() {
		if v.Usable(c, beads) && !listed[c] {
			on = append(on, string(c))
		}
	}
	switch {
	case (len(listed) > 1 || len(listed) == 1 && !listed[""]) && len(on) > 0:
		on = append(on, "and each one named below with its commands")
	case len(listed) > 1 || len(listed) == 1 && !listed[""]:
		on = append(on, "each one named below with its commands")
	case len(on) == 0:
		on = []string{"none"}
	}
	fmt.Fprintf(&b, "Capabilities on: %s.\n", strings.Join(on, ", "))
	if cli == nil {
		fmt.Fprintf(&b, "Your tools: %s. You have no others.\n", strings.Join(v.Tools(beads), ", "))
	} else {
		b.WriteString(cliToolsLine(cli, v) + "\n")
	}
	b.WriteString(cb.String())
	return strings.TrimRight(b.String(), "\n")
}

func modeIntro(s mode.Spec, v mode.Vector, cli *mode.CLITools) string {
	// What the session cannot do, claimed only where it is enforced.
	cannot := " You cannot edit files or run commands."
	if cli != nil {
		switch unenforced := cli.Unenforced; {
		case slices.Contains(unenforced, mode.CanEditFiles):
			cannot = ""
		case slices.Contains(unenforced, mode.CanRunCommands):
			cannot = " You cannot edit files."
		}
	}
	switch {
	case s.Profile() == mode.Review:
		return "You check your teammates' work and report what you find." + cannot
	case s.Kind() == mode.Coordinate && !v.Has(mode.CanEditFiles):
		return "You decompose the work and delegate it; your teammates make the changes." + cannot
	case s.Kind() == mode.Coordinate:
		return "You decompose the work and delegate it; your teammates make the changes."
	default:
		return "You make the changes yourself, on your branch."
	}
}

// phases are the strategy's steps: analyze, plan, execute or delegate,
// report, complete, as fits. A phase names no command the vector refuses.
func phases(s mode.Spec, v mode.Vector) []string {
	report := "report: tell whoever asked how it goes, and say at once when you are blocked."
	if v.Has(mode.CanReportTaskLevel) {
		report = "report: `swarm report progress` on each task as it moves, `swarm report blocked` as soon as you are stuck."
	}
	complete := "complete: commit, tell whoever asked, then end the session with a short summary and no tool call."
	switch {
	case s.Profile() == mode.Review:
		return []string{
			"analyze: read what you were sent (diffs, paths, descriptions) and the files in your worktree.",
			"execute: look for bugs, missing tests, broken contracts and security problems before style.",
			"report: send the author one verdict: approved, or the problems, most serious first, each with file:line, what is wrong and why; mark what must be fixed apart from suggestions.",
			"complete: end the session with a short summary and no tool call.",
		}
	case s.Kind() == mode.Coordinate:
		plan := "plan: split the work into small tasks, each with one owner, the files involved, the expected result and how to check it."
		delegate := "delegate: hand each task to its owner; never one task to two agents, and do not do the work yourself."
		switch s.EffectiveStrategy() {
		case mode.DAG:
			plan = "plan: order the tasks by their dependencies (Layers under Available Tasks); a layer waits for the ones before it."
			delegate = "delegate: hand out every task of the first open layer at once, in parallel; the next layer when its blockers close."
		case mode.IntelligentBatching:
			plan = "plan: group independent tasks into batches (Batches under Available Tasks); nothing in a batch depends on another task of it."
			delegate = "delegate: hand out a whole batch at once, in parallel; the next batch when this one is done."
		}
		return []string{
			"analyze: read your mail, the open tasks and enough of the code to plan.",
			plan, delegate,
			"report: follow up, answer questions, unblock, re-plan when things change, and tell `operator` about progress and decisions.",
			"complete: close what your teammates finished, then end the session with a short summary and no tool call.",
		}
	case s.EffectiveStrategy() == mode.Queue:
		return []string{
			"analyze: take the next ready task from the queue, and claim it before anything else.",
			"plan: read the task, the code and tests involved.",
			"execute: make the change, build it, test it, commit it.",
			report,
			"complete: mark the task complete once committed (or failed, with the reason), then end the session; the next task starts a new one.",
		}
	case s.EffectiveStrategy() == mode.Tree:
		return []string{
			"analyze: your task tree is under Available Tasks, in dependency order.",
			"execute: work the subtasks in that order, one at a time: claim, change, test, commit, close.",
			"report: report each subtask as it moves, complete or blocked.",
			"complete: when the tree is done, report the session and end it with a short summary and no tool call.",
		}
	}
	return []string{
		"analyze: read your mail and the task, the code and tests involved.",
		"plan: the smallest change that does the job, in your role's part of the code; a teammate's part goes to them as a message.",
		"execute: edit, build, test and commit, one logical step per commit.",
		report, complete,
	}
}

func modeRules(s mode.Spec, v mode.Vector) []string {
	if !v.Has(mode.CanClaimTasks) {
		return nil
	}
	if s.Kind() == mode.Execute {
		return []string{"Claim a task before you start it, and close it once the work is committed."}
	}
	// A coordinator's rule (name the task id in each hand-out) is in its
	// dispatch command lines, and in Available Tasks when there are some.
	return nil
}

// cliToolsLine names an external CLI's tools for the session: its own, as
// limited, then the swarm MCP server's.
func cliToolsLine(cli *mode.CLITools, v mode.Vector) string {
	name := cli.CLI
	if name == "" {
		name = "your CLI"
	}
	var b strings.Builder
	if cli.Tools != nil {
		fmt.Fprintf(&b, "Your tools: %s's own (%s", name, strings.Join(cli.Tools, ", "))
		if cli.ShellNote != "" {
			fmt.Fprintf(&b, "; its shell is %s", cli.ShellNote)
		}
		b.WriteString(")")
	} else {
		b.WriteString("Your tools: your CLI's own")
	}
	if cli.MCP {
		tools := v.MCPTools()
		for i, t := range tools {
			tools[i] = cli.MCPPrefix + t
		}
		fmt.Fprintf(&b, ", and the swarm's MCP tools (server %q): %s", "swarm", strings.Join(tools, ", "))
	}
	b.WriteString(".")
	if cli.How != "" {
		fmt.Fprintf(&b, " %s's other tools are off for this session.", name)
	}
	return b.String()
}
