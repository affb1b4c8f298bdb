package mode

// MCPTools are the swarm MCP server's tools (swarm mcp) the vector
// offers, in the order they are listed: the one list the server registers
// and the prompt names.
func (v Vector) MCPTools() []string {
	var out []string
	if v.Has(CanMessage) {
		out = append(out, "send_message", "send_protocol", "reply", "ack")
	}
	out = append(out, "inbox")
	if v.Has(CanEscalate) {
		out = append(out, "escalate")
	}
	if v.Has(CanReportTaskLevel) || v.Has(CanReportSessionLevel) {
		out = append(out, "report")
	}
	if v.Has(CanSpawnSessions) {
		out = append(out, "spawn")
	}
	if !v.Has(CanRunCommands) {
		// No shell to run git or swarm diff in: a reviewer reads the
		// commit it reviews here (DESIGN §13.3).
		out = append(out, "diff")
	}
	return out
}

// CLITools is what an external CLI agent (an exec engine) really gives a
// session with a given vector, so that its prompt describes that and not
// the in-process tools (DESIGN §9.6).
type CLITools struct {
	// CLI names the CLI ("Claude Code"); "" for a custom command.
	CLI string
	// Tools are the CLI's own tools left on, as it names them; nil when
	// swarm does not know them (a custom command).
	Tools []string
	// Shell says the CLI can run shell commands; ShellNote qualifies it
	// ("read-only: commands cannot write files").
	Shell     bool
	ShellNote string
	// MCPPrefix is how the CLI names the swarm MCP server's tools
	// ("mcp__swarm__"); MCP is false when the CLI does not get the server.
	MCP       bool
	MCPPrefix string
	// Unenforced lists the capabilities the vector turns off that the CLI
	// cannot keep off: the prompt does not claim them, and swarm doctor
	// warns.
	Unenforced []Capability
	// How says how the limits are put on the CLI, for the doctor and the
	// session log ("--disallowedTools Edit,Write,NotebookEdit,Bash").
	How string
}
