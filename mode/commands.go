package mode

import (
	"fmt"
	"slices"
	"strings"
)

// Command is one command line an agent may run, from a shell or through
// the swarm tool. Syntax is the source of truth the prompt shows; ID is
// metadata only.
type Command struct {
	ID         string
	Capability Capability // "" for the reads every agent may run
	Program    string     // "swarm" or "bd"
	Args       []string   // the fixed subcommand words after Program
	Flag       string     // a flag the line must carry ("--claim"), if any
	Value      string     // the value Flag must have ("task" for --kind), if any
	Syntax     string     // the executable line, placeholders in <>
	Does       string     // what it is for, a few words
	// Pending marks a command that is not built yet: it is neither shown
	// nor allowed until its issue lands and clears the mark.
	Pending bool
	// Hidden marks a command that is allowed but not listed in section 3:
	// the workflow's commands, which section 4 names for the agent whose
	// stage it is.
	Hidden bool
}

// Line is the command's syntax.
func (c Command) Line() string { return c.Syntax }

// Commands is the table of every command, grouped by capability in
// display order. To add a command, add a row; Vector.Commands, the
// prompt, the swarm tool and the CLI checks follow.
var Commands = []Command{
	{ID: "swarm:status", Program: "swarm", Args: []string{"status"}, Syntax: "swarm status", Does: "every agent's state and last report"},
	{ID: "swarm:inbox", Program: "swarm", Args: []string{"inbox"}, Syntax: "swarm inbox <name> [--sent]", Does: "mail and its state"},
	{ID: "swarm:thread", Program: "swarm", Args: []string{"thread"}, Syntax: "swarm thread <id>", Does: "a message and its replies"},

	{ID: "mail:send", Capability: CanMessage, Program: "swarm", Args: []string{"send"}, Syntax: `swarm send <to> "<message>" [--urgent] [--reply-to <id>]`, Does: "mail a teammate or operator"},
	{ID: "mail:reply", Capability: CanMessage, Program: "swarm", Args: []string{"reply"}, Syntax: `swarm reply <id> "<message>"`, Does: "answer a message in its thread"},
	{ID: "protocol:send", Capability: CanMessage, Program: "swarm", Args: []string{"send"}, Flag: "--type", Syntax: `swarm send <to> --type <type> --task <id> --payload '<json>'`, Does: "a typed protocol message"},
	{ID: "protocol:ack", Capability: CanMessage, Program: "swarm", Args: []string{"ack"}, Syntax: "swarm ack <msg_id>", Does: "acknowledge a protocol message that asks for an ACK"},

	{ID: "mail:dispatch", Capability: CanDispatch, Program: "swarm", Args: []string{"send"}, Flag: "--kind", Value: "task", Syntax: `swarm send <agent> "<task id: what, files, how to check>" --kind task`, Does: "hand a task to its owner"},
	{ID: "protocol:dispatch", Capability: CanDispatch, Program: "swarm", Args: []string{"send"}, Flag: "--type", Value: "task_dispatch", Syntax: `swarm send <agent> --type task_dispatch --task <id> --payload '<json>'`, Does: "hand a task to its owner, checked, with an ACK deadline"},

	{ID: "task:ready", Capability: CanClaimTasks, Program: "bd", Args: []string{"ready"}, Syntax: "bd ready --json", Does: "tasks nothing blocks"},
	{ID: "task:show", Capability: CanClaimTasks, Program: "bd", Args: []string{"show"}, Syntax: "bd show <id> --json", Does: "a task's details"},
	{ID: "task:claim", Capability: CanClaimTasks, Program: "bd", Args: []string{"update"}, Flag: "--claim", Syntax: "bd update <id> --claim --json", Does: "claim a task before you start it"},
	{ID: "task:close", Capability: CanClaimTasks, Program: "bd", Args: []string{"close"}, Syntax: `bd close <id> --reason "<what was done>" --json`, Does: "close a finished task"},

	{ID: "task:create", Capability: CanEditTasks, Program: "bd", Args: []string{"create"}, Syntax: `bd create "<title>" -p <0-4> [--parent <id>] -d "<description>" --json`, Does: "add a task"},
	{ID: "task:depend", Capability: CanEditTasks, Program: "bd", Args: []string{"dep", "add"}, Syntax: "bd dep add <blocked id> <blocker id> --json", Does: "record that one task waits for another"},
	{ID: "task:list", Capability: CanEditTasks, Program: "bd", Args: []string{"list"}, Syntax: "bd list --json", Does: "every open task"},

	{ID: "queue:top", Capability: CanUseQueue, Program: "swarm", Args: []string{"queue", "top"}, Syntax: "swarm queue top", Does: "the next ready task"},
	{ID: "queue:start", Capability: CanUseQueue, Program: "swarm", Args: []string{"queue", "start"}, Syntax: "swarm queue start <id>", Does: "claim it and start"},
	{ID: "queue:complete", Capability: CanUseQueue, Program: "swarm", Args: []string{"queue", "complete"}, Syntax: `swarm queue complete <id> [--reason "<what was done>"]`, Does: "close it once committed"},
	{ID: "queue:fail", Capability: CanUseQueue, Program: "swarm", Args: []string{"queue", "fail"}, Syntax: `swarm queue fail <id> --reason "<why>"`, Does: "give it back, saying why"},

	{ID: "session:spawn", Capability: CanSpawnSessions, Program: "swarm", Args: []string{"spawn"}, Syntax: `swarm spawn <name> --role "<role>" [--task <id>] [--ephemeral]`, Does: "start a new teammate"},

	{ID: "task:report:progress", Capability: CanReportTaskLevel, Program: "swarm", Args: []string{"report", "progress"}, Syntax: `swarm report progress <task> "<message>"`, Does: "tell your coordinator how a task goes"},
	{ID: "task:report:blocked", Capability: CanReportTaskLevel, Program: "swarm", Args: []string{"report", "blocked"}, Syntax: `swarm report blocked <task> "<what blocks it>"`, Does: "say a task is stuck"},
	{ID: "task:report:complete", Capability: CanReportTaskLevel, Program: "swarm", Args: []string{"report", "complete"}, Syntax: `swarm report complete <task> "<what was done>"`, Does: "say a task is done"},

	// File reservations (DESIGN §14): Environment lists them, so the list
	// command is allowed but not shown.
	{ID: "files:reserve", Capability: CanEditFiles, Program: "swarm", Args: []string{"reserve"}, Syntax: `swarm reserve <glob>... [--exclusive] [--ttl <d>] [--reason "<why>"]`, Does: "tell teammates which files you are changing"},
	{ID: "files:release", Capability: CanEditFiles, Program: "swarm", Args: []string{"release"}, Syntax: "swarm release [<glob>...]", Does: "release your file reservations"},
	{ID: "files:reservations", Program: "swarm", Args: []string{"reservations"}, Syntax: "swarm reservations", Does: "who reserved which files", Hidden: true},

	{ID: "session:report", Capability: CanReportSessionLevel, Program: "swarm", Args: []string{"report", "session"}, Syntax: `swarm report session "<message>"`, Does: "a milestone of this session"},

	// The workflows' (DESIGN §9.3): section 4 gives the exact line to the
	// agent whose stage it is.
	{ID: "workflow:signal", Capability: CanMessage, Program: "swarm", Args: []string{"workflow", "signal"}, Syntax: "swarm workflow signal --item <id> --status COMPLETE --next <state>", Does: "end your dev-qa stage", Hidden: true},
	{ID: "workflow:status", Program: "swarm", Args: []string{"workflow", "status"}, Syntax: "swarm workflow status [<name>]", Does: "the workflows' items", Hidden: true},
	{ID: "workflow:history", Program: "swarm", Args: []string{"workflow", "history"}, Syntax: "swarm workflow history <item>", Does: "an item's transitions", Hidden: true},
	// A reviewer reads the commit it reviews (DESIGN §13.3); the review
	// request and section 4 give the exact line.
	{ID: "review:diff", Program: "swarm", Args: []string{"diff"}, Flag: "--commit", Syntax: "swarm diff <agent> --commit <hash> [-- <path>...]", Does: "read a reviewed commit", Hidden: true},

	{ID: "merge:land", Capability: CanLand, Program: "swarm", Args: []string{"land"}, Syntax: "swarm land", Does: "queue your committed branch to land on the base branch"},

	{ID: "operator:escalate", Capability: CanEscalate, Program: "swarm", Args: []string{"escalate"}, Syntax: `swarm escalate "<summary>" [--hold] [--approval]`, Does: "ask operator for a decision now"},
}

// Commands lists the commands the vector allows, in table order, leaving
// out bd's when beads is false and pending ones always.
func (v Vector) Commands(beads bool) []Command {
	var out []Command
	for _, c := range Commands {
		if c.Pending || c.Hidden || (c.Program == "bd" && !beads) {
			continue
		}
		if c.Capability == "" || v[c.Capability] {
			out = append(out, c)
		}
	}
	return out
}

// CommandsFor lists the allowed commands of one capability.
func (v Vector) CommandsFor(cap Capability, beads bool) []Command {
	var out []Command
	for _, c := range v.Commands(beads) {
		if c.Capability == cap {
			out = append(out, c)
		}
	}
	return out
}

// Match returns the command an argv (program first) runs, or an error
// naming what the vector allows instead. The most specific row of the
// whole table decides (more subcommand words, then a required flag, then
// its value), so `swarm send x "..." --kind task` is a dispatch even for an
// agent that may send mail.
func (v Vector) Match(argv []string, beads bool) (Command, error) {
	if len(argv) == 0 {
		return Command{}, fmt.Errorf("empty command: give the program (swarm or bd) and its arguments")
	}
	best, found := Command{}, false
	for _, c := range Commands {
		if !c.Pending && c.matches(argv) && (!found || c.specificity() > best.specificity()) {
			best, found = c, true
		}
	}
	switch {
	case found && best.Program == "bd" && !beads:
		return Command{}, fmt.Errorf("%q needs bd, which is not installed here", strings.Join(argv, " "))
	case found && (best.Capability == "" || v[best.Capability]):
		return best, nil
	case found:
		return Command{}, fmt.Errorf("%q needs %s, which this session does not have", best.Syntax, best.Capability)
	}
	var lines []string
	for _, c := range v.Commands(beads) {
		lines = append(lines, c.Syntax)
	}
	return Command{}, fmt.Errorf("%q is not a command you may run; you may run: %s", strings.Join(argv, " "), strings.Join(lines, "; "))
}

func (c Command) specificity() int {
	n := 4 * len(c.Args)
	if c.Flag != "" {
		n += 2
	}
	if c.Value != "" {
		n++
	}
	return n
}

func (c Command) matches(argv []string) bool {
	if argv[0] != c.Program || len(argv) < 1+len(c.Args) || !slices.Equal(argv[1:1+len(c.Args)], c.Args) {
		return false
	}
	if c.Flag == "" {
		return true
	}
	rest := argv[1+len(c.Args):]
	for i, a := range rest {
		switch {
		case c.Value == "" && (a == c.Flag || strings.HasPrefix(a, c.Flag+"=")):
			return true
		case c.Value != "" && (a == c.Flag+"="+c.Value || a == c.Flag && i+1 < len(rest) && rest[i+1] == c.Value):
			return true
		}
	}
	return false
}
