package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/swarmhq/swarm/control"
	"slices"
	"strconv"
	"strings"
	"sync"

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

The identity is the session's: $SWARM_AGENT and $SWARM_SESSION_ID, never
a tool argument. Each tool runs the swarm command of the same name, so
validation, wake-ups and refusals are exactly the CLI's, and only the
tools the agent's capabilities allow are offered:

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
	pctx, cancel := context.WithTimeout(ctx, doorTimeout)
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
	s := &mcpServer{app: app, agent: agent}
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

// mcpServer runs each tool as the swarm command of the same name, in this
// process: the same validation, refusals, wake-ups and, on PostgreSQL, the
// same path through the supervisor as the CLI.
type mcpServer struct {
	app   *App
	agent string
	// staged says the agent works stages of a dev-qa workflow, which it
	// ends with workflow_signal.
	staged bool
	mu     sync.Mutex // one command at a time: they share the process
}

// swarm runs one swarm command and returns its output and exit code.
func (s *mcpServer) swarm(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out, errb bytes.Buffer
	sub := &App{Stdin: bytes.NewReader(nil), Stdout: &out, Stderr: &errb, Env: s.app.Env, Cwd: s.app.Cwd, Dir: s.app.Dir, nested: true}
	code = run(ctx, sub, args)
	return out.String(), errb.String(), code
}

// capabilities reads the agent's vector as 'swarm status --json' shows it:
// its session's, stored when the session started.
func (s *mcpServer) capabilities(ctx context.Context) (mode.Vector, error) {
	out, errs, code := s.swarm(ctx, "status", "--json")
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

// register adds the tools the capabilities allow. The list stays short:
// every definition costs context on every model turn.
func (s *mcpServer) register(srv *mcp.Server, caps mode.Vector) {
	offered := caps.MCPTools()
	on := func(name string) bool { return slices.Contains(offered, name) }
	if on("send_message") {
		mcp.AddTool(srv, &mcp.Tool{Name: "send_message", Description: "Send a message to a teammate or operator (swarm send)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, any, error) {
				args := []string{"send", "--json"}
				if in.Urgent {
					args = append(args, "--urgent")
				}
				if in.ReplyTo != "" {
					args = append(args, "--reply-to", in.ReplyTo)
				}
				return result(s.swarm(ctx, append(args, "--", in.To, in.Body)...))
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "send_protocol", Description: "Send a typed protocol message (swarm send --type); it is validated before it is stored."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in protocolIn) (*mcp.CallToolResult, any, error) {
				payload, err := json.Marshal(in.Payload)
				if err != nil {
					return result("", "payload: "+err.Error(), exitUsage)
				}
				args := []string{"send", "--json", "--type", in.Type, "--payload", string(payload)}
				if in.Task != "" {
					args = append(args, "--task", in.Task)
				}
				if in.ReplyTo != "" {
					args = append(args, "--reply-to", in.ReplyTo)
				}
				for _, r := range in.ContextRef {
					args = append(args, "--context-ref", r)
				}
				if in.AckTimeout != "" {
					args = append(args, "--ack-timeout", in.AckTimeout)
				}
				if in.NoAck {
					args = append(args, "--no-ack")
				}
				return result(s.swarm(ctx, append(args, "--", in.To)...))
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "reply", Description: "Answer a message in its thread (swarm reply)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in replyIn) (*mcp.CallToolResult, any, error) {
				args := []string{"reply", "--json"}
				if in.Urgent {
					args = append(args, "--urgent")
				}
				return result(s.swarm(ctx, append(args, "--", in.ID, in.Body)...))
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "ack", Description: "Acknowledge a protocol message that asks for an ack (swarm ack)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in ackIn) (*mcp.CallToolResult, any, error) {
				switch {
				case in.All:
					return result(s.swarm(ctx, "ack", "--json", "--all"))
				case in.MsgID == "":
					return result("", "give msg_id, or all: true", 2)
				}
				return result(s.swarm(ctx, "ack", "--json", "--", in.MsgID))
			})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "inbox", Description: "List your mail, oldest first (swarm inbox)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in inboxIn) (*mcp.CallToolResult, any, error) {
			limit := in.Limit
			if limit <= 0 {
				limit = 20
			}
			args := []string{"inbox", s.agent, "--json", "--limit", strconv.Itoa(limit)}
			if in.State != "" {
				args = append(args, "--state", in.State)
			}
			return result(s.swarm(ctx, args...))
		})
	if on("escalate") {
		mcp.AddTool(srv, &mcp.Tool{Name: "escalate", Description: "Ask the human operator to decide or know something (swarm escalate)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in escalateIn) (*mcp.CallToolResult, any, error) {
				args := []string{"escalate", "--json"}
				if in.Severity != "" {
					args = append(args, "--severity", in.Severity)
				}
				if in.Hold {
					args = append(args, "--hold")
				}
				if in.Approval {
					args = append(args, "--approval")
				}
				if in.Ref != "" {
					args = append(args, "--ref", in.Ref)
				}
				return result(s.swarm(ctx, append(args, "--", in.Summary)...))
			})
	}
	// Only an agent of a dev-qa workflow gets workflow_signal: every tool
	// definition costs context on every turn.
	if on("send_message") && s.staged {
		mcp.AddTool(srv, &mcp.Tool{Name: "workflow_signal", Description: "End your dev-qa stage (swarm workflow signal); Workflow Context names the next states."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in signalIn) (*mcp.CallToolResult, any, error) {
				args := []string{"workflow", "signal", "--json", "--status", in.Status}
				if in.Item != "" {
					args = append(args, "--item", in.Item)
				}
				if in.Next != "" {
					args = append(args, "--next", in.Next)
				}
				if in.Message != "" {
					args = append(args, "--message", in.Message)
				}
				for _, a := range in.Artifact {
					args = append(args, "--artifact", a)
				}
				return result(s.swarm(ctx, args...))
			})
	}
	if on("report") {
		mcp.AddTool(srv, &mcp.Tool{Name: "report", Description: "Report a task's progress, blockage or completion, or a session milestone, to your coordinator (swarm report)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in reportIn) (*mcp.CallToolResult, any, error) {
				args := []string{"report", in.Kind, "--json", "--"}
				if in.Task != "" {
					args = append(args, in.Task)
				}
				return result(s.swarm(ctx, append(args, in.Message)...))
			})
	}
	if on("spawn") {
		mcp.AddTool(srv, &mcp.Tool{Name: "spawn", Description: "Add a teammate with its own worktree, and send it its role as a task (swarm spawn)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in spawnIn) (*mcp.CallToolResult, any, error) {
				args := []string{"spawn", "--json", "--role", in.Role}
				if in.Task != "" {
					args = append(args, "--task", in.Task)
				}
				if in.Ephemeral {
					args = append(args, "--ephemeral")
				}
				return result(s.swarm(ctx, append(args, "--", in.Name)...))
			})
	}
	if on("diff") {
		mcp.AddTool(srv, &mcp.Tool{Name: "diff", Description: "Read the commit you review against the base branch, all of it or some files (swarm diff --commit)."},
			func(ctx context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, any, error) {
				args := []string{"diff", "--color", "never", "--commit", in.Commit}
				if in.Stat {
					args = append(args, "--stat")
				}
				if in.Dev == "" || strings.HasPrefix(in.Dev, "-") {
					return result("", "give dev: the agent whose commit you review", exitUsage)
				}
				return result(s.swarm(ctx, append(append(args, in.Dev, "--"), in.Paths...)...))
			})
	}
}
