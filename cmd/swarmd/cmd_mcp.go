package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/internal/front"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/swarmhq/swarm/mode"
)

// MCPOptions are the inputs of `swarm mcp`.
type MCPOptions struct {
	App *App
	// Serve runs the server on a transport; tests give an in-memory one.
	Transport mcp.Transport
}

func newMCPCmd(app *App, runF func(*MCPOptions) error) *cobra.Command {
	opts := &MCPOptions{App: app}
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the swarm's verbs to a CLI agent over MCP (stdio)",
		Long: `Serve the swarm's verbs as MCP tools on stdin and stdout, for an
external CLI agent (Claude Code, Codex, Gemini CLI) running a session.
The exec presets register it in every session themselves; run it by hand
only to register it with a CLI of your own.

The identity is the session's door's ($SWARM_DOOR), never a tool
argument. Each tool calls the verb of the swarm command of the same name
with its typed input, through the door, so validation, wake-ups and
refusals are exactly the CLI's, and only the tools the agent's
capabilities allow are offered:

  send_message    swarm send            can_message
  send_protocol   swarm send --type     can_message (task_dispatch: can_dispatch)
  reply           swarm reply           can_message
  ack             swarm ack             can_message
  inbox           swarm inbox           always
  escalate        swarm escalate        can_escalate
  report          swarm report          can_report_task_level or _session_level
  diff            swarm diff --commit   without can_run_commands (a reviewer)

A tool's result is the command's --json output (diff's is the patch
itself); a refusal is a tool
error with the command's message.`,
		Example: `  # Claude Code
  claude --mcp-config '{"mcpServers":{"swarm":{"command":"swarm","args":["mcp"]}}}'
  # Codex
  codex -c 'mcp_servers.swarm.command="swarm"' -c 'mcp_servers.swarm.args=["mcp"]'
  # Gemini CLI: in a settings.json
  {"mcpServers": {"swarm": {"command": "swarm", "args": ["mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runMCP(cmd.Context(), opts)
		},
	}
}

func runMCP(ctx context.Context, opts *MCPOptions) error {
	app := opts.App
	door := app.Env.Getenv(control.DoorEnv)
	if door == "" && app.Env.Getenv(MCPProbeEnv) == "1" {
		// swarm doctor asks whether a CLI loads the server at all: it
		// starts and offers nothing, since no door says whose it is.
		return serveMCP(ctx, opts, mcp.NewServer(&mcp.Implementation{Name: "swarm", Version: version}, nil))
	}
	if door == "" {
		return usagef("swarm mcp serves an agent's session: run it with its door, $%s, set (the exec presets do); the operator uses the swarm commands directly", control.DoorEnv)
	}
	// The door says whose session this is; its tools run as that session
	// whatever they are asked.
	pctx, cancel := context.WithTimeout(ctx, front.Timeout)
	resp, err := control.CallAt(pctx, door, control.Request{Op: control.OpPing})
	cancel()
	if err != nil {
		return fmt.Errorf("swarm mcp: this session's door (%s) did not answer: %w; the session may have ended", door, err)
	}
	var who struct {
		Agent string `json:"agent"`
	}
	if err := json.Unmarshal(resp.Data, &who); err != nil || who.Agent == "" {
		return fmt.Errorf("swarm mcp: this session's door (%s) gave no agent: %s", door, resp.Data)
	}
	agent := who.Agent
	s := &mcpServer{app: app, door: door, agent: agent}
	caps, err := s.capabilities(ctx)
	if err != nil {
		return err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "swarm", Version: version}, nil)
	s.register(srv, caps)
	return serveMCP(ctx, opts, srv)
}

// MCPProbeEnv set to 1 makes `swarm mcp` without a door start with no
// tools: swarm doctor's check that a CLI loads the server.
const MCPProbeEnv = "SWARM_MCP_PROBE"

// serveMCP serves srv on the options' transport (stdio by default) until
// the client goes or ctx ends.
func serveMCP(ctx context.Context, opts *MCPOptions, srv *mcp.Server) error {
	t := opts.Transport
	if t == nil {
		t = &mcp.StdioTransport{}
	}
	if err := srv.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// mcpServer calls each tool's verb with its typed input through the
// session's door (control.OpCall): the supervisor runs it as the session
// the door is, with the same validation, refusals and wake-ups as the
// command of the same name, whose --json output is the tool's result.
type mcpServer struct {
	app   *App
	door  string
	agent string
	// staged says the agent works stages of a dev-qa workflow, which it
	// ends with workflow_signal.
	staged bool
}

// call calls verb with its typed request in through the door and returns
// what its command printed and its exit code.
func (s *mcpServer) call(ctx context.Context, verb string, in any) (stdout, stderr string, code int) {
	args, err := json.Marshal(in)
	if err != nil {
		return "", "swarm: " + err.Error(), exitUsage
	}
	cctx, cancel := context.WithTimeout(ctx, front.Timeout)
	defer cancel()
	res, err := control.CallVerbAt(cctx, s.door, control.CallRequest{Verb: verb, Args: args, Dir: s.app.Cwd})
	var refused *control.RunRefused
	switch {
	case errors.As(err, &refused):
		return "", "swarm: " + refused.Reason, exitError
	case errors.Is(err, control.ErrNoSupervisor):
		return "", fmt.Sprintf("swarm: this session's door (%s) is closed: the session has ended, or the supervisor stopped; nothing was done", s.door), exitError
	case err != nil:
		return "", fmt.Sprintf("swarm: this session's door did not answer: %v", err), exitError
	}
	return res.Stdout, res.Stderr, res.Code
}

// capabilities reads the agent's vector as 'swarm status --json' shows it:
// its session's, stored when the session started.
func (s *mcpServer) capabilities(ctx context.Context) (mode.Vector, error) {
	out, errs, code := s.call(ctx, "status", struct{}{})
	if code != 0 {
		return nil, fmt.Errorf("read %s's capabilities: %s", s.agent, strings.TrimSpace(errs))
	}
	var st struct {
		Agents []struct {
			Name         string          `json:"name"`
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"agents"`
		Workflows []struct {
			Kind  string            `json:"kind"`
			Roles map[string]string `json:"roles"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("read %s's capabilities: %w", s.agent, err)
	}
	for _, w := range st.Workflows {
		for _, a := range w.Roles {
			s.staged = s.staged || (w.Kind == "dev-qa" && a == s.agent)
		}
	}
	for _, a := range st.Agents {
		if a.Name == s.agent {
			v := mode.Vector{}
			for k, on := range a.Capabilities {
				v[mode.Capability(k)] = on
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("no agent %q in swarm.toml: swarm mcp serves a configured agent's session", s.agent)
}

// result turns a command's outcome into a tool result: its output, or a
// tool error with its message, which the model reads and can act on.
func result(stdout, stderr string, code int) (*mcp.CallToolResult, any, error) {
	if code != 0 {
		msg := strings.TrimSpace(stderr)
		if msg == "" {
			msg = fmt.Sprintf("exit status %d", code)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil, nil
	}
	text := strings.TrimSpace(stdout)
	res := &mcp.CallToolResult{}
	// JSON output is also the structured result, always an object: some
	// clients (gemini-cli) read a JSON text as structured content and
	// reject anything but an object, which turned a stored message into a
	// "failed" call the model would retry.
	var v any
	if json.Unmarshal([]byte(text), &v) == nil {
		if _, isObject := v.(map[string]any); !isObject {
			v = map[string]any{"result": v}
		}
		res.StructuredContent = v
	}
	if w := strings.TrimSpace(stderr); w != "" {
		text += "\n" + w // warnings the command printed
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	return res, nil, nil
}

// The tools' inputs. Field docs become the schema's descriptions; fields
// without omitempty are required.
type (
	sendIn struct {
		To      string `json:"to" jsonschema:"a teammate, or operator"`
		Body    string `json:"body" jsonschema:"the message"`
		Urgent  bool   `json:"urgent,omitempty" jsonschema:"interrupt the recipient"`
		ReplyTo string `json:"reply_to,omitempty" jsonschema:"the message number this answers"`
	}
	protocolIn struct {
		To         string         `json:"to" jsonschema:"a teammate, operator, or swarm"`
		Type       string         `json:"type" jsonschema:"task_dispatch, task_result, review_request, review_verdict or ack"`
		Task       string         `json:"task,omitempty" jsonschema:"the task id"`
		Payload    map[string]any `json:"payload" jsonschema:"the type's payload"`
		ReplyTo    string         `json:"reply_to,omitempty" jsonschema:"the number or msg_id this answers"`
		ContextRef []string       `json:"context_ref,omitempty" jsonschema:"msg_ids it refers to"`
		AckTimeout string         `json:"ack_timeout,omitempty" jsonschema:"ack deadline, like 5m"`
		NoAck      bool           `json:"no_ack,omitempty" jsonschema:"ask for no ack"`
	}
	replyIn struct {
		ID     string `json:"id" jsonschema:"the number or msg_id to answer"`
		Body   string `json:"body" jsonschema:"the answer"`
		Urgent bool   `json:"urgent,omitempty" jsonschema:"interrupt the recipient"`
	}
	ackIn struct {
		MsgID string `json:"msg_id,omitempty" jsonschema:"the msg_id or number to ack"`
		All   bool   `json:"all,omitempty" jsonschema:"ack all awaiting ones"`
	}
	inboxIn struct {
		State string `json:"state,omitempty" jsonschema:"queued, delivered or done"`
		Limit int    `json:"limit,omitempty" jsonschema:"the newest N (default 20)"`
	}
	escalateIn struct {
		Summary  string `json:"summary" jsonschema:"what the operator must decide or know"`
		Severity string `json:"severity,omitempty" jsonschema:"info, warning (default) or critical"`
		Hold     bool   `json:"hold,omitempty" jsonschema:"stop until the operator decides"`
		Approval bool   `json:"approval,omitempty" jsonschema:"a yes/no question"`
		Ref      string `json:"ref,omitempty" jsonschema:"what it is about: msg:<id>"`
	}
	signalIn struct {
		Item     string   `json:"item,omitempty" jsonschema:"the item (default: yours)"`
		Status   string   `json:"status" jsonschema:"COMPLETE, ERROR or TIMEOUT"`
		Next     string   `json:"next,omitempty" jsonschema:"the next state, with COMPLETE"`
		Message  string   `json:"message,omitempty" jsonschema:"what you did or found"`
		Artifact []string `json:"artifact,omitempty" jsonschema:"paths you created"`
	}
	reportIn struct {
		Kind    string `json:"kind" jsonschema:"progress, blocked, complete (a task) or session"`
		Task    string `json:"task,omitempty" jsonschema:"the task, except for session"`
		Message string `json:"message" jsonschema:"what to report"`
	}
	diffIn struct {
		Dev    string   `json:"dev" jsonschema:"whose branch the commit is on"`
		Commit string   `json:"commit" jsonschema:"the reviewed commit's hash"`
		Paths  []string `json:"paths,omitempty" jsonschema:"only these files"`
		Stat   bool     `json:"stat,omitempty" jsonschema:"list the files instead"`
	}
	spawnIn struct {
		Name      string `json:"name" jsonschema:"the new agent's name"`
		Role      string `json:"role" jsonschema:"what it is for; its first task mail"`
		Task      string `json:"task,omitempty" jsonschema:"the task it is for"`
		Ephemeral bool   `json:"ephemeral,omitempty" jsonschema:"retire when it has no work left"`
	}
)

// mistake says what an input lacks before it is sent, "" for nothing (the
// verb checks it again: a door is called by others too).
func (in ackIn) mistake() string {
	if !in.All && in.MsgID == "" {
		return "give msg_id, or all: true"
	}
	return ""
}

func (in diffIn) mistake() string {
	if in.Dev == "" || strings.HasPrefix(in.Dev, "-") {
		return "give dev: the agent whose commit you review"
	}
	return ""
}

// register adds the tools the capabilities allow. The list stays short:
// every definition costs context on every model turn.
func (s *mcpServer) register(srv *mcp.Server, caps mode.Vector) {
	offered := caps.MCPTools()
	on := func(name string) bool { return slices.Contains(offered, name) }
	if on("send_message") {
		addVerb[sendIn](s, srv, "send_message", "Send a message to a teammate or operator (swarm send).")
		addVerb[protocolIn](s, srv, "send_protocol", "Send a typed protocol message (swarm send --type); it is validated before it is stored.")
		addVerb[replyIn](s, srv, "reply", "Answer a message in its thread (swarm reply).")
		addVerb[ackIn](s, srv, "ack", "Acknowledge a protocol message that asks for an ack (swarm ack).")
	}
	addVerb[inboxIn](s, srv, "inbox", "List your mail, oldest first (swarm inbox).")
	if on("escalate") {
		addVerb[escalateIn](s, srv, "escalate", "Ask the human operator to decide or know something (swarm escalate).")
	}
	// Only an agent of a dev-qa workflow gets workflow_signal: every tool
	// definition costs context on every turn.
	if on("send_message") && s.staged {
		addVerb[signalIn](s, srv, "workflow_signal", "End your dev-qa stage (swarm workflow signal); Workflow Context names the next states.")
	}
	if on("report") {
		addVerb[reportIn](s, srv, "report", "Report a task's progress, blockage or completion, or a session milestone, to your coordinator (swarm report).")
	}
	if on("spawn") {
		addVerb[spawnIn](s, srv, "spawn", "Add a teammate with its own worktree, and send it its role as a task (swarm spawn).")
	}
	if on("diff") {
		addVerb[diffIn](s, srv, "diff", "Read the commit you review against the base branch, all of it or some files (swarm diff --commit).")
	}
}

// addVerb offers the tool name, whose typed input In is the request of
// the verb of the same name (mcpVerbs), called through the door.
func addVerb[In any](s *mcpServer, srv *mcp.Server, name, description string) {
	mcp.AddTool(srv, &mcp.Tool{Name: name, Description: description},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			if c, ok := any(in).(interface{ mistake() string }); ok && c.mistake() != "" {
				return result("", c.mistake(), exitUsage)
			}
			return result(s.call(ctx, name, in))
		})
}
