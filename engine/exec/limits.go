package exec

import (
	"slices"
	"strings"

	"github.com/swarmhq/swarm/mode"
)

// This file puts the session's capability vector on a preset's CLI with
// the CLI's own switches, and says what the CLI then offers, for an honest
// prompt (DESIGN §9.6). Only can_edit_files and can_run_commands concern
// the CLI: the swarm commands and MCP tools check the rest themselves.

// Each preset's own tools, as the model sees them, and which of them edit
// files or run commands.
var (
	claudeTools      = []string{"Read", "Edit", "Write", "NotebookEdit", "Bash", "WebFetch", "WebSearch", "Task"}
	claudeEditTools  = []string{"Edit", "Write", "NotebookEdit"}
	claudeShellTools = []string{"Bash"}

	geminiTools      = []string{"read_file", "read_many_files", "list_directory", "glob", "grep_search", "web_fetch", "google_web_search", "write_file", "replace", "run_shell_command"}
	geminiEditTools  = []string{"write_file", "replace"}
	geminiShellTools = []string{"run_shell_command"}

	codexTools = []string{"shell", "apply_patch", "update_plan"}
)

// codexBypass is the codex preset's flag that runs it unsandboxed; a
// session that may not edit or run commands gets a read-only sandbox
// instead.
const codexBypass = "--dangerously-bypass-approvals-and-sandbox"

// limits is how one session's vector is put on the CLI.
type limits struct {
	args    []string // added after the command (claude)
	replace [2]string
	exclude []string // gemini-cli's tools.exclude
	tools   mode.CLITools
}

// limitsFor works out the limits of a preset's session. A custom command
// (kind "") cannot be limited: everything the vector turns off is
// unenforced.
func limitsFor(kind string, caps mode.Vector) limits {
	noEdit, noShell := !caps.Has(mode.CanEditFiles), !caps.Has(mode.CanRunCommands)
	var l limits
	switch kind {
	case MCPClaude:
		var off []string
		if noEdit {
			off = append(off, claudeEditTools...)
		}
		if noShell {
			off = append(off, claudeShellTools...)
		}
		l.tools = mode.CLITools{CLI: "Claude Code", Tools: without(claudeTools, off), Shell: !noShell, MCP: true, MCPPrefix: "mcp__swarm__"}
		if len(off) > 0 {
			l.args = []string{"--disallowedTools", strings.Join(off, ",")}
			l.tools.How = "--disallowedTools " + strings.Join(off, ",")
		}
	case MCPCodex:
		l.tools = mode.CLITools{CLI: "Codex", Tools: codexTools, Shell: true, MCP: true}
		if noEdit || noShell {
			// Codex cannot drop its shell: a read-only sandbox keeps its
			// commands from writing, which is what matters here.
			l.replace = [2]string{codexBypass, "--sandbox=read-only"}
			l.tools.Tools = []string{"shell", "update_plan"}
			l.tools.ShellNote = "read-only: its commands cannot write files, so run swarm commands through the MCP tools"
			l.tools.How = "--sandbox read-only"
			if noShell {
				l.tools.Unenforced = []mode.Capability{mode.CanRunCommands}
			}
		}
	case MCPGemini:
		if noEdit {
			l.exclude = append(l.exclude, geminiEditTools...)
		}
		if noShell {
			l.exclude = append(l.exclude, geminiShellTools...)
		}
		l.tools = mode.CLITools{CLI: "Gemini CLI", Tools: without(geminiTools, l.exclude), Shell: !noShell, MCP: true}
		if len(l.exclude) > 0 {
			l.tools.How = "tools.exclude " + strings.Join(l.exclude, ",") + " in the session's settings"
		}
	default:
		l.tools = mode.CLITools{Shell: true}
		for _, c := range []mode.Capability{mode.CanEditFiles, mode.CanRunCommands} {
			if !caps.Has(c) {
				l.tools.Unenforced = append(l.tools.Unenforced, c)
			}
		}
	}
	return l
}

func without(all, off []string) []string {
	var out []string
	for _, t := range all {
		if !slices.Contains(off, t) {
			out = append(out, t)
		}
	}
	return out
}

// CLITools says what a session of this engine with capabilities caps
// really has: the CLI's own tools as limited, the swarm MCP server, and
// the limits it cannot keep (engine.CLI).
func (e *Engine) CLITools(caps mode.Vector) mode.CLITools {
	if caps == nil {
		caps = mode.Vector{}
	}
	return limitsFor(e.mcp, caps).tools
}
