package verbs

import (
	"fmt"
	"strings"
)

// Door is one way into the swarm (DESIGN §13.2).
type Door string

// The doors.
const (
	CLI    Door = "cli"    // the swarm commands, run by the operator or through a session's door
	MCP    Door = "mcp"    // `swarm mcp`'s tools: typed verb calls through the session's door (control.OpCall)
	Live   Door = "tui"    // the live view (`swarm up`, `swarm watch`)
	Desk   Door = "web"    // the web desk
	Engine Door = "engine" // the in-process engines' tools
	Socket Door = "socket" // the operator's control socket (a session's door refuses the operation)
)

// Verb is one row of the verb/door/rule table: the function (or Queue
// method) in this package, the command that offers it, the doors that
// call it and the rule it checks before it acts.
type Verb struct {
	Name    string
	Command string
	Doors   []Door
	Rule    string
}

// Table is every verb of this package. TestTableListsEveryVerb keeps it
// complete; the README's "Who is asking" section renders it (Markdown).
var Table = []Verb{
	{"Send", "swarm send", []Door{CLI, MCP, Live, Desk, Engine}, "capability can_message (can_dispatch for a task); sender: --from names the caller"},
	{"Reply", "swarm reply", []Door{CLI, MCP, Desk}, "capability can_message; sender"},
	{"SendProtocol", "swarm send --type", []Door{CLI, MCP, Engine}, "capability can_message (can_dispatch for a dispatch); sender; verdict: a review_verdict only from the reviewer's current session, answering the open request; own_session for acks and results"},
	{"Ack", "swarm ack", []Door{CLI, MCP, Engine}, "capability can_message; own_session"},
	{"AckAll", "swarm ack --all", []Door{CLI, MCP, Engine}, "capability can_message; own_session"},
	{"ProtocolLog", "swarm protocol log", []Door{CLI}, "known caller (a read)"},
	{"Escalate", "swarm escalate", []Door{CLI, MCP, Engine}, "capability can_escalate; hold_self: an agent holds only itself"},
	{"MarkRead", "swarm inbox --mark-read", []Door{CLI, Desk}, "mark_read: only the operator marks the operator's mail read"},
	{"Decide", "swarm escalation ack|resume|abort|approve|reject", []Door{CLI, Live, Desk}, "operator_only; a session acks only its own agent's (own_session)"},
	{"Report", "swarm report", []Door{CLI, MCP}, "capability can_report_task_level / can_report_session_level; own_session"},
	{"Queue.Top", "swarm queue top", []Door{CLI}, "capability can_use_queue"},
	{"Queue.Start", "swarm queue start", []Door{CLI}, "capability can_use_queue"},
	{"Queue.Complete", "swarm queue complete", []Door{CLI}, "capability can_use_queue"},
	{"Queue.Fail", "swarm queue fail", []Door{CLI}, "capability can_use_queue"},
	{"Land", "swarm land", []Door{CLI, Desk}, "capability can_land; own_session; operator_only for --all and --item"},
	{"CancelLanding", "swarm land --cancel", []Door{CLI, Desk}, "operator_only"},
	{"WaitLanded", "swarm land --wait", []Door{CLI}, "known caller (a read)"},
	{"StartItem", "swarm workflow start", []Door{CLI}, "capability can_dispatch"},
	{"SignalItem", "swarm workflow signal", []Door{CLI, MCP}, "stage: only the stage's agent's session"},
	{"AbortItem", "swarm workflow abort", []Door{CLI, Desk}, "operator_only"},
	{"MergeItem", "swarm workflow merge", []Door{CLI, Desk}, "operator_only"},
	{"MergeApproved", "swarm escalation approve (an item's approval)", []Door{CLI, Live, Desk}, "operator_only"},
	{"WorkflowStatus", "swarm workflow status", []Door{CLI, Desk}, "known caller (a read)"},
	{"History", "swarm workflow history", []Door{CLI, Desk}, "known caller (a read)"},
	{"Spawn", "swarm spawn", []Door{CLI, MCP}, "capability can_spawn_sessions"},
	{"Retire", "swarm retire", []Door{CLI}, "operator_only"},
	{"Reserve", "swarm reserve", []Door{CLI}, "capability can_edit_files; own_session"},
	{"Release", "swarm release", []Door{CLI, Desk}, "own_session"},
	{"Reservations", "swarm reservations", []Door{CLI, Desk}, "known caller (a read)"},
	{"Status", "swarm status", []Door{CLI, MCP, Live, Desk}, "known caller (a read)"},
	{"ReadBudgets", "swarm status (budgets)", []Door{CLI, Live, Desk}, "known caller (a read)"},
	{"Preview", "swarm prompt", []Door{CLI}, "known caller (a read)"},
	{"Team", "swarm team", []Door{CLI}, "known caller (a read)"},
	{"Pause", "swarm pause", []Door{CLI, Live, Desk, Socket}, "operator_only"},
	{"Resume", "swarm resume", []Door{CLI, Live, Desk, Socket}, "operator_only"},
	{"Reload", "swarm reload", []Door{CLI, Socket}, "operator_only"},
	{"Stop", "swarm down (the socket's stop)", []Door{Socket}, "operator_only"},
	{"Up", "swarm up", []Door{CLI}, "operator_only"},
	{"Down", "swarm down", []Door{CLI, Socket}, "operator_only"},
	{"Web", "swarm web", []Door{CLI}, "operator_only"},
}

// Markdown renders Table for the README.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| verb | command | doors | rule checked first |\n| --- | --- | --- | --- |\n")
	for _, v := range Table {
		doors := make([]string, len(v.Doors))
		for i, d := range v.Doors {
			doors[i] = string(d)
		}
		fmt.Fprintf(&b, "| `verbs.%s` | `%s` | %s | %s |\n", v.Name, v.Command, strings.Join(doors, ", "), v.Rule)
	}
	return b.String()
}
