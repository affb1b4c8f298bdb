package exec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/swarmhq/swarm/engine"
	"github.com/swarmhq/swarm/internal/text"
)

// How much of a tool's output, and of its arguments, a rendered log shows.
const (
	renderResultLines = 6
	renderResultBytes = 600
	renderArgString   = 80  // one string argument
	renderArgBytes    = 240 // all of a call's arguments
	renderUserLines   = 3   // the prompt, as gemini-cli echoes it
)

// IsExecLog says whether a session log, given its first lines, was written
// by an exec engine, whose output Render can read: its first "=== session"
// line (after the supervisor's "# session" line) names an exec command.
func IsExecLog(head []byte) bool {
	line, ok := sessionLine(head)
	return ok && bytes.Contains(line, []byte(" · exec "))
}

// sessionLine is the first complete "=== session" line of head.
func sessionLine(head []byte) ([]byte, bool) {
	for len(head) > 0 {
		line, rest, complete := bytes.Cut(head, []byte("\n"))
		if !complete {
			return nil, false
		}
		if bytes.HasPrefix(line, []byte("=== session ")) {
			return line, true
		}
		head = rest
	}
	return nil, false
}

// HasSessionLine says whether head holds the line IsExecLog looks for, so
// a reader of a growing log knows it can decide.
func HasSessionLine(head []byte) bool {
	_, ok := sessionLine(head)
	return ok
}

// Render is an exec session's log made readable: the JSON events of
// claude (stream-json), codex (exec --json) and gemini-cli (stream-json)
// become text, tool calls (name and compact arguments), the head of tool
// results, errors and the final result with its usage. Any other line is
// kept as it is. It is the whole-log form of Renderer.
func Render(log []byte) []byte {
	var b bytes.Buffer
	r := NewRenderer(&b)
	_, _ = r.Write(log)
	_ = r.Flush()
	return b.Bytes()
}

// Renderer renders a log as it is written (for swarm logs -f): each
// complete line is rendered when its newline arrives; Flush renders the
// rest.
type Renderer struct {
	w        io.Writer
	err      error
	line     []byte
	skipping bool              // the current line is over maxLine: pass it through
	tools    map[string]string // tool call id -> name, for results
	delta    strings.Builder   // gemini: assistant text being streamed
	message  string            // claude: the id of the message being shown
}

// NewRenderer returns a Renderer writing to w.
func NewRenderer(w io.Writer) *Renderer {
	return &Renderer{w: w, tools: map[string]string{}}
}

// Write takes the next bytes of the log. It fails only when w does.
func (r *Renderer) Write(p []byte) (int, error) {
	rest := p
	for len(rest) > 0 && r.err == nil {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i+1]
		}
		switch {
		case r.skipping:
			r.raw(chunk)
		case len(r.line)+len(chunk) > maxLine:
			r.flushDelta()
			r.raw(r.line)
			r.raw(chunk)
			r.line, r.skipping = r.line[:0], true
		default:
			r.line = append(r.line, chunk...)
		}
		if i < 0 {
			break
		}
		if !r.skipping {
			r.render(r.line)
		}
		r.line, r.skipping = r.line[:0], false
		rest = rest[i+1:]
	}
	if r.err != nil {
		return 0, r.err
	}
	return len(p), nil
}

// Flush renders a last line without its newline and any text in progress.
func (r *Renderer) Flush() error {
	if len(r.line) > 0 && !r.skipping {
		r.render(r.line)
		r.line = r.line[:0]
	}
	r.flushDelta()
	return r.err
}

func (r *Renderer) raw(b []byte) {
	if r.err == nil && len(b) > 0 {
		_, r.err = r.w.Write(b)
	}
}

func (r *Renderer) printf(format string, a ...any) {
	if r.err == nil {
		_, r.err = fmt.Fprintf(r.w, format, a...)
	}
}

// streamEvent is the union of the events of the three CLIs.
type streamEvent struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	// claude
	Model   string `json:"model"`
	Session string `json:"session_id"`
	// Message is claude's message object, or the text of codex's and
	// gemini-cli's "error" events.
	Message    json.RawMessage             `json:"message"`
	IsError    bool                        `json:"is_error"`
	NumTurns   int                         `json:"num_turns"`
	DurationMS int64                       `json:"duration_ms"`
	CostUSD    float64                     `json:"total_cost_usd"`
	Result     json.RawMessage             `json:"result"`
	Usage      *tokens                     `json:"usage"`
	ModelUsage map[string]claudeModelUsage `json:"modelUsage"`
	Errors     []string                    `json:"errors"`
	// codex
	Thread string      `json:"thread_id"`
	Item   *codexItem  `json:"item"`
	Error  *errorValue `json:"error"`
	// gemini-cli
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Delta      bool            `json:"delta"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Stats      *geminiStats    `json:"stats"`
}

// claudeMessage is the message of a claude "assistant" or "user" event.
type claudeMessage struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

// message is ev's claude message, nil when it has none.
func (ev *streamEvent) message() *claudeMessage {
	var m claudeMessage
	if len(ev.Message) == 0 || ev.Message[0] != '{' || json.Unmarshal(ev.Message, &m) != nil {
		return nil
	}
	return &m
}

// errorValue is {"message": ...} or a plain string.
type errorValue struct{ Message string }

func (e *errorValue) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		e.Message = s
		return nil
	}
	var o struct {
		Message string `json:"message"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	e.Message = o.Message
	return nil
}

type codexItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Command   string          `json:"command"`
	Output    string          `json:"aggregated_output"`
	ExitCode  *int            `json:"exit_code"`
	Status    string          `json:"status"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
	Error     *errorValue     `json:"error"`
	Query     string          `json:"query"`
	Message   string          `json:"message"`
	Changes   []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
}

// claudeBlock is one content block of a claude message.
type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (r *Renderer) render(line []byte) {
	trimmed := bytes.TrimSpace(line)
	var ev streamEvent
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &ev) != nil || ev.Type == "" || !r.known(&ev, trimmed) {
		r.flushDelta()
		r.raw(line)
		if len(line) > 0 && line[len(line)-1] != '\n' {
			r.raw([]byte("\n"))
		}
		return
	}
	if !(ev.Type == "message" && ev.Role == "assistant" && ev.Delta) {
		r.flushDelta()
	}
	switch {
	// claude
	case ev.Type == "system" && ev.Subtype == "init":
		r.printf("[init] model %s · session %s\n", ev.Model, ev.Session)
	case ev.Type == "system":
		r.printf("[system] %s\n", ev.Subtype)
	case ev.Type == "assistant":
		m := ev.message()
		r.claudeAssistant(m.ID, m.Content)
	case ev.Type == "user":
		r.claudeUser(ev.message().Content)
	case ev.Type == "result" && ev.Stats == nil:
		r.claudeResult(&ev)
	// codex
	case ev.Type == "thread.started":
		r.printf("[init] thread %s\n", ev.Thread)
	case ev.Type == "turn.started":
		r.printf("\n[turn]\n")
	case ev.Type == "turn.completed":
		r.printf("\n[turn completed] %s\n", FormatUsage(ev.Usage.codex()))
	case ev.Type == "turn.failed":
		r.printf("  ! turn failed: %s\n", errText(ev.Error))
	case ev.Type == "item.started" || ev.Type == "item.updated" || ev.Type == "item.completed":
		r.codexItem(ev.Type, ev.Item)
	case ev.Type == "error" && ev.Severity == "":
		r.printf("  ! %s\n", messageOf(ev.Message))
	// gemini-cli
	case ev.Type == "init":
		r.printf("[init] model %s · session %s\n", ev.Model, ev.Session)
	case ev.Type == "message":
		r.geminiMessage(&ev)
	case ev.Type == "tool_use":
		r.tools[ev.ToolID] = ev.ToolName
		r.printf("  → %s %s\n", ev.ToolName, compactArgs(ev.Parameters))
	case ev.Type == "tool_result":
		r.toolResult(r.tools[ev.ToolID], ev.Status == "error", ev.Output, errText(ev.Error))
	case ev.Type == "error":
		r.printf("  ! %s: %s\n", ev.Severity, messageOf(ev.Message))
	case ev.Type == "result":
		r.printf("\n[result] %s", ev.Status)
		if ev.Error != nil {
			r.printf(" · %s", ev.Error.Message)
		}
		r.printf(" · %s\n", FormatUsage(ev.Stats.stream()))
	}
}

// known says whether ev is an event the renderer shows; others are kept
// verbatim.
func (r *Renderer) known(ev *streamEvent, line []byte) bool {
	switch ev.Type {
	case "system", "assistant", "user", "result", "thread.started", "turn.started", "turn.completed", "turn.failed",
		"init", "message", "tool_use", "tool_result", "error":
	case "item.started", "item.updated", "item.completed":
		return ev.Item != nil
	default:
		return false
	}
	switch ev.Type {
	case "assistant", "user":
		return ev.message() != nil
	case "turn.completed":
		return ev.Usage != nil
	}
	return true
}

func (r *Renderer) claudeAssistant(id string, content json.RawMessage) {
	var blocks []claudeBlock
	if json.Unmarshal(content, &blocks) != nil {
		return
	}
	if id == "" || id != r.message {
		r.printf("\n[model]\n")
		r.message = id
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			r.printf("%s\n", indentText(b.Text))
		case "thinking":
			if b.Thinking != "" {
				r.printf("  (thinking) %s\n", strings.TrimPrefix(indentText(b.Thinking), "  "))
			}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			r.tools[b.ID] = b.Name
			r.printf("  → %s %s\n", b.Name, compactArgs(b.Input))
		}
	}
}

func (r *Renderer) claudeUser(content json.RawMessage) {
	r.message = ""
	var blocks []claudeBlock
	if json.Unmarshal(content, &blocks) != nil {
		var text string
		if json.Unmarshal(content, &text) == nil && text != "" {
			r.printf("\n[user]\n%s\n", indentText(headLines(text, renderUserLines)))
		}
		return
	}
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			out := blockText(b.Content)
			r.toolResult(r.tools[b.ToolUseID], b.IsError, out, "")
		case "text":
			r.printf("\n[user]\n%s\n", indentText(headLines(b.Text, renderUserLines)))
		}
	}
}

func (r *Renderer) claudeResult(ev *streamEvent) {
	r.message = ""
	r.printf("\n[result] %s", ev.Subtype)
	if ev.IsError {
		r.printf(" (error)")
	}
	if ev.NumTurns > 0 {
		r.printf(" · %d turns", ev.NumTurns)
	}
	if ev.DurationMS > 0 {
		r.printf(" · %.1fs", float64(ev.DurationMS)/1000)
	}
	if ev.CostUSD > 0 {
		r.printf(" · $%.4f", ev.CostUSD)
	}
	var u tokens
	if ev.Usage != nil {
		u = *ev.Usage
	}
	usage := u.claude()
	if len(ev.ModelUsage) > 0 {
		usage = sumModelUsage(ev.ModelUsage)
	}
	r.printf(" · %s\n", FormatUsage(usage))
	if ev.IsError {
		var text string
		if json.Unmarshal(ev.Result, &text) == nil && text != "" {
			r.printf("%s\n", indentText(headLines(text, renderResultLines)))
		}
		for _, e := range ev.Errors {
			r.printf("  ! %s\n", e)
		}
	}
}

func (r *Renderer) codexItem(typ string, it *codexItem) {
	done := typ == "item.completed"
	switch it.Type {
	case "agent_message":
		if done {
			r.printf("\n[model]\n%s\n", indentText(it.Text))
		}
	case "reasoning":
		if done && it.Text != "" {
			r.printf("  (thinking) %s\n", strings.TrimPrefix(indentText(it.Text), "  "))
		}
	case "command_execution":
		if typ == "item.started" {
			r.printf("  → shell %s\n", text.Truncate(it.Command, renderArgBytes))
			return
		}
		if !done {
			return
		}
		failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
		name := "shell"
		if it.ExitCode != nil {
			name = fmt.Sprintf("shell exit %d", *it.ExitCode)
		}
		r.toolResult(name, failed, it.Output, "")
	case "file_change":
		if done {
			var ch []string
			for _, c := range it.Changes {
				ch = append(ch, c.Kind+" "+c.Path)
			}
			r.printf("  → edit %s", strings.Join(ch, ", "))
			if it.Status != "" && it.Status != "completed" {
				r.printf(" (%s)", it.Status)
			}
			r.printf("\n")
		}
	case "mcp_tool_call":
		name := it.Server + "." + it.Tool
		if typ == "item.started" {
			r.printf("  → %s %s\n", name, compactArgs(it.Arguments))
			return
		}
		if done {
			if typ == "item.completed" && it.Status != "" && it.Status != "completed" && it.Error == nil {
				it.Error = &errorValue{Message: it.Status}
			}
			if it.Error != nil {
				// A call that failed at once never had its start shown.
				r.printf("  → %s %s\n", name, compactArgs(it.Arguments))
			}
			r.toolResult(name, it.Error != nil, blockText(it.Result), errText(it.Error))
		}
	case "web_search":
		if done {
			r.printf("  → web_search %s\n", text.Truncate(it.Query, renderArgString))
		}
	case "todo_list":
	case "error":
		if done {
			r.printf("  ! %s\n", it.Message)
		}
	}
}

func (r *Renderer) geminiMessage(ev *streamEvent) {
	var text string
	_ = json.Unmarshal(ev.Content, &text)
	switch {
	case ev.Role == "user":
		r.printf("\n[user]\n%s\n", indentText(headLines(text, renderUserLines)))
	case ev.Delta:
		r.delta.WriteString(text)
	default:
		r.printf("\n[model]\n%s\n", indentText(text))
	}
}

// flushDelta prints the assistant text gemini-cli streamed so far.
func (r *Renderer) flushDelta() {
	if r.delta.Len() == 0 {
		return
	}
	text := r.delta.String()
	r.delta.Reset()
	r.printf("\n[model]\n%s\n", indentText(text))
}

func (r *Renderer) toolResult(name string, failed bool, output, errMsg string) {
	if name == "" {
		name = "tool"
	}
	switch {
	case failed && errMsg != "":
		r.printf("  ← %s error: %s\n", name, errMsg)
	case failed:
		r.printf("  ← %s error\n", name)
	default:
		r.printf("  ← %s\n", name)
	}
	if out := strings.TrimRight(output, "\n"); out != "" {
		r.printf("%s\n", indentText(indentText(clipOutput(out))))
	}
}

func sumModelUsage(m map[string]claudeModelUsage) (u engine.Usage) {
	for _, mu := range m {
		u = u.Add(engine.Usage{InputTokens: mu.Input, OutputTokens: mu.Output, CacheWrite: mu.CacheCreate, CacheRead: mu.CacheRead})
	}
	return u
}

// blockText is a tool result's content: a string, or text blocks.
func blockText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	var o struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil && len(o.Content) > 0 {
		return blockText(o.Content)
	}
	return string(raw)
}

// messageOf is the "message" string of an error event.
func messageOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw)
	}
	return s
}

func errText(e *errorValue) string {
	if e == nil {
		return ""
	}
	return e.Message
}

// compactArgs is a call's arguments as one line of JSON, long strings
// clipped.
func compactArgs(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return text.Truncate(string(raw), renderArgBytes)
	}
	b, err := engine.LogJSON(clipStrings(v))
	if err != nil {
		return text.Truncate(string(raw), renderArgBytes)
	}
	return text.Truncate(string(b), renderArgBytes)
}

func clipStrings(v any) any {
	switch x := v.(type) {
	case string:
		return text.Truncate(x, renderArgString)
	case map[string]any:
		for k, e := range x {
			x[k] = clipStrings(e)
		}
	case []any:
		for i, e := range x {
			x[i] = clipStrings(e)
		}
	}
	return v
}

// clipOutput is the head of a tool's output.
func clipOutput(s string) string {
	total := len(s)
	out := text.Truncate(headLines(s, renderResultLines), renderResultBytes)
	out = strings.TrimSuffix(out, "…")
	if len(out) < total {
		out += fmt.Sprintf("\n… (%d more bytes)", total-len(out))
	}
	return out
}

func headLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func indentText(s string) string {
	s = strings.TrimRight(s, "\n")
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
