package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mode"
)

// Tool arguments arrive as a map decoded by whatever produced the call:
// JSON gives float64 numbers, TOML (the script engine) gives int64, and
// models sometimes quote numbers or booleans. The parsers below are pure
// functions from that map to typed arguments, so they can be fuzzed, and
// their errors tell the model exactly which argument to fix.

// Bash tool limits.
const (
	DefaultBashTimeout = 2 * time.Minute
	MaxBashTimeout     = time.Hour
)

type bashArgs struct {
	Command string
	Timeout time.Duration
}

type readArgs struct {
	Path       string
	Start, End int // 1-based, inclusive; 0 means unset
}

type writeArgs struct {
	Path, Content string
}

type editArgs struct {
	Path, Old, New string
}

type listArgs struct {
	Path      string
	Recursive bool
}

type grepArgs struct {
	Pattern, Path string
}

type sendArgs struct {
	To, Body string
	Urgent   bool
	ReplyTo  int64
}

type escalateArgs struct {
	Summary, Severity, Ref string
	Hold, Approval         bool
	Details                json.RawMessage
}

type protocolArgs struct {
	ProtocolMessage
}

type ackArgs struct {
	Ref string
	All bool
}

type taskArgs struct {
	ID, Reason string
}

type swarmArgs struct {
	Argv []string
}

// maxArgv bounds the swarm tool's argument list.
const maxArgv = 64

// argList reads a required list of strings, untrimmed: the swarm tool's
// argv.
func (r *argReader) argList(key string) []string {
	v, ok := r.get(key)
	if !ok {
		r.fail("missing required argument %q", key)
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		if ss, ok := v.([]string); ok {
			return ss
		}
		r.fail("argument %q must be an array of strings, got %s", key, typeName(v))
		return nil
	}
	if len(list) > maxArgv {
		r.fail("argument %q has %d items, at most %d", key, len(list), maxArgv)
		return nil
	}
	out := make([]string, 0, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			r.fail("argument %q: item %d must be a string, got %s", key, i, typeName(x))
			return nil
		}
		out = append(out, s)
	}
	return out
}

// argReader reads one tool's arguments and remembers the first problem.
type argReader struct {
	tool string
	args map[string]any
	used []string
	err  error
}

func (r *argReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %s", r.tool, fmt.Sprintf(format, a...))
	}
}

func (r *argReader) get(key string) (any, bool) {
	r.used = append(r.used, key)
	v, ok := r.args[key]
	if ok && v == nil {
		return nil, false // JSON null means absent
	}
	return v, ok
}

func (r *argReader) str(key string, required bool) string {
	v, ok := r.get(key)
	if !ok {
		if required {
			r.fail("missing required argument %q", key)
		}
		return ""
	}
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case float64, int64, int:
		return fmt.Sprint(v)
	}
	r.fail("argument %q must be a string, got %s", key, typeName(v))
	return ""
}

func (r *argReader) nonEmpty(key string) string {
	s := r.str(key, true)
	if r.err == nil && strings.TrimSpace(s) == "" {
		r.fail("argument %q must not be empty", key)
	}
	return s
}

// lineRange reads start_line and end_line (each optional, 1 or more, end
// not before start); 0 means not given.
func (r *argReader) lineRange() (start, end int) {
	s, hasStart := r.integer("start_line")
	e, hasEnd := r.integer("end_line")
	switch {
	case hasStart && s < 1:
		r.fail("start_line must be 1 or more, got %d", s)
	case hasEnd && e < 1:
		r.fail("end_line must be 1 or more, got %d", e)
	case hasStart && hasEnd && e < s:
		r.fail("end_line (%d) is before start_line (%d)", e, s)
	case s > math.MaxInt32 || e > math.MaxInt32:
		r.fail("line numbers must be below %d", math.MaxInt32)
	}
	return int(s), int(e)
}

func (r *argReader) integer(key string) (int64, bool) {
	v, ok := r.get(key)
	if !ok {
		return 0, false
	}
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case float32:
		f = float64(v)
	case int:
		return int64(v), true
	case int64:
		return v, true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, true
		}
		var err error
		if f, err = v.Float64(); err != nil {
			r.fail("argument %q must be an integer, got %q", key, v.String())
			return 0, false
		}
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return 0, false // an empty substitution, such as a script's ${mail.latest.id} with no mail
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			r.fail("argument %q must be an integer, got %q", key, v)
			return 0, false
		}
		return n, true
	default:
		r.fail("argument %q must be an integer, got %s", key, typeName(v))
		return 0, false
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<53 {
		r.fail("argument %q must be a whole number, got %v", key, f)
		return 0, false
	}
	return int64(f), true
}

// object reads a JSON object argument: an object, or a string holding one
// (models sometimes send JSON as text).
func (r *argReader) object(key string) json.RawMessage {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // a diff's "<" and "&&" stay as written
		if err := enc.Encode(v); err != nil {
			r.fail("argument %q: %v", key, err)
			return nil
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	case string:
		var m map[string]any
		if strings.TrimSpace(v) == "" {
			return nil
		}
		if err := json.Unmarshal([]byte(v), &m); err != nil || m == nil {
			r.fail("argument %q must be a JSON object, such as {\"file\": \"api/users.go\"}", key)
			return nil
		}
		return json.RawMessage(v)
	}
	r.fail("argument %q must be an object, got %s", key, typeName(v))
	return nil
}

// strs reads a list of strings: an array, or one string for a list of one.
func (r *argReader) strs(key string) []string {
	v, ok := r.get(key)
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return nil
		}
		return []string{strings.TrimSpace(v)}
	case []any:
		out := make([]string, 0, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				r.fail("argument %q must be an array of strings; item %d is %s", key, i, typeName(x))
				return nil
			}
			out = append(out, strings.TrimSpace(s))
		}
		return out
	}
	r.fail("argument %q must be an array of strings, got %s", key, typeName(v))
	return nil
}

func (r *argReader) boolean(key string) bool {
	v, ok := r.get(key)
	if !ok {
		return false
	}
	switch v := v.(type) {
	case bool:
		return v
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b
		}
	}
	r.fail("argument %q must be true or false, got %v", key, v)
	return false
}

// done reports unknown arguments (a misspelt name would otherwise be
// silently ignored) and returns the first error.
func (r *argReader) done() error {
	if r.err != nil {
		return r.err
	}
	var unknown []string
	for k := range r.args {
		if !slices.Contains(r.used, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		accepted := slices.Clone(r.used)
		return fmt.Errorf("%s: unknown argument(s) %s (accepted: %s)", r.tool, strings.Join(quoteAll(unknown), ", "), strings.Join(accepted, ", "))
	}
	return nil
}

// parseArgs turns a tool call's arguments into the tool's typed arguments.
func parseArgs(tool string, args map[string]any) (any, error) {
	r := &argReader{tool: tool, args: args}
	var out any
	switch tool {
	case mode.Bash:
		a := bashArgs{Command: r.nonEmpty("command"), Timeout: DefaultBashTimeout}
		if n, ok := r.integer("timeout_seconds"); ok {
			if n < 1 || n > int64(MaxBashTimeout/time.Second) {
				r.fail("timeout_seconds must be between 1 and %d, got %d", int64(MaxBashTimeout/time.Second), n)
			}
			a.Timeout = time.Duration(n) * time.Second
		}
		out = a
	case mode.ReadFile:
		a := readArgs{Path: r.nonEmpty("path")}
		a.Start, a.End = r.lineRange()
		out = a
	case mode.WriteFile:
		out = writeArgs{Path: r.nonEmpty("path"), Content: r.str("content", true)}
	case mode.EditFile:
		a := editArgs{Path: r.nonEmpty("path"), Old: r.str("old", true), New: r.str("new", true)}
		if r.err == nil && a.Old == "" {
			r.fail("argument \"old\" must not be empty: give the exact text to replace (use write_file to create a file)")
		}
		out = a
	case mode.ListFiles:
		out = listArgs{Path: r.str("path", false), Recursive: r.boolean("recursive")}
	case mode.Grep:
		a := grepArgs{Pattern: r.str("pattern", true), Path: r.str("path", false)}
		if r.err == nil && a.Pattern == "" {
			r.fail("argument \"pattern\" must not be empty")
		}
		out = a
	case mode.GitDiff, mode.GitShow:
		a := gitArgs{Commit: r.str("commit", false), Path: r.str("path", false)}
		if tool == mode.GitDiff {
			a.Stat = r.boolean("stat")
		}
		a.Start, a.End = r.lineRange()
		out = a
	case mode.SendMessage:
		a := sendArgs{To: strings.TrimSpace(r.nonEmpty("to")), Body: r.nonEmpty("body"), Urgent: r.boolean("urgent")}
		if n, ok := r.integer("reply_to"); ok {
			if n < 0 {
				r.fail("reply_to must be a message id, got %d", n)
			}
			a.ReplyTo = n
		}
		out = a
	case mode.Escalate:
		a := escalateArgs{Summary: strings.TrimSpace(r.nonEmpty("summary")), Severity: strings.TrimSpace(r.str("severity", false)),
			Hold: r.boolean("hold"), Approval: r.boolean("approval"), Ref: strings.TrimSpace(r.str("ref", false)), Details: r.object("details")}
		switch a.Severity {
		case "", "info", "warning", "critical":
		default:
			r.fail("severity must be info, warning or critical, got %q", a.Severity)
		}
		out = a
	case mode.SendProtocol:
		a := ProtocolMessage{Type: strings.TrimSpace(r.nonEmpty("type")), To: strings.TrimSpace(r.str("to", false)),
			TaskID: strings.TrimSpace(r.str("task_id", false)), Payload: r.object("payload"),
			ReplyTo: strings.TrimSpace(r.str("reply_to", false)), ContextRef: r.strs("context_ref"), NoAck: r.boolean("no_ack")}
		if a.Payload == nil && r.err == nil {
			r.fail("missing required argument \"payload\": give the type's payload as an object")
		}
		if n, ok := r.integer("ack_timeout_seconds"); ok {
			if n < 1 || n > 7*24*3600 {
				r.fail("ack_timeout_seconds must be between 1 and %d, got %d", 7*24*3600, n)
			}
			a.AckTimeout = time.Duration(n) * time.Second
		}
		if r.err == nil && a.To == "" && a.ReplyTo == "" {
			r.fail("give \"to\" (the recipient), or \"reply_to\" to answer a message")
		}
		if r.err == nil && a.TaskID == "" && a.ReplyTo == "" {
			r.fail("give \"task_id\", or \"reply_to\" to answer a message about its task")
		}
		out = protocolArgs{a}
	case mode.Ack:
		a := ackArgs{Ref: strings.TrimSpace(r.str("msg_id", false)), All: r.boolean("all")}
		if r.err == nil && (a.Ref == "") == !a.All {
			r.fail("give either \"msg_id\" (the message to acknowledge) or \"all\": true")
		}
		out = a
	case mode.Swarm:
		a := swarmArgs{Argv: r.argList("argv")}
		if r.err == nil && len(a.Argv) == 0 {
			r.fail("argument \"argv\" must not be empty: give the program and its arguments, such as [\"swarm\", \"status\"]")
		}
		out = a
	case mode.BDClaim, mode.BDShow:
		out = taskArgs{ID: strings.TrimSpace(r.nonEmpty("id"))}
	case mode.BDClose:
		out = taskArgs{ID: strings.TrimSpace(r.nonEmpty("id")), Reason: r.str("reason", false)}
	default:
		return nil, fmt.Errorf("unknown tool %q", tool)
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return out, nil
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, float32, int, int64, json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}
