package protocol

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// FieldError is one failing field.
type FieldError struct {
	// Path is the field's JSON path in the envelope, dotted, with array
	// indexes in brackets: payload.subtasks[1].subtask_id. A key that is not
	// a plain identifier is quoted: payload["my field"].
	Path string
	// Reason says what is wrong and, where it is not obvious, what to do.
	Reason string
	// Err is a typed cause the caller acts on, such as a *BranchViolation;
	// nil for most fields.
	Err error
}

func (f FieldError) Error() string { return f.Path + ": " + f.Reason }

// ValidationError is a message refused before it was stored. It lists every
// failing field, so a sender can fix them all in one go. The CLI exits 2 on
// it; any other error from this package (the store failing to answer a
// lookup) is not the sender's fault.
type ValidationError struct {
	Type   Type // the message's type, when known
	Fields []FieldError
}

// Error lists the failing fields, one per line, in path order.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		lines[i] = f.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the typed causes, so errors.As finds a *BranchViolation.
func (e *ValidationError) Unwrap() []error {
	var errs []error
	for _, f := range e.Fields {
		if f.Err != nil {
			errs = append(errs, f.Err)
		}
	}
	return errs
}

// Field returns the error at path, if any. Tests and callers that react to
// one field use it.
func (e *ValidationError) Field(path string) (FieldError, bool) {
	for _, f := range e.Fields {
		if f.Path == path {
			return f, true
		}
	}
	return FieldError{}, false
}

// BranchViolation is a task_dispatch naming a protected branch: main,
// master or the swarm's base branch. Agents commit only on their own
// branches (§6 of the prompt); the caller refuses the message and raises a
// critical branch_violation escalation that holds the sender when the sender
// is an agent.
type BranchViolation struct {
	Branch string // as the dispatch named it
	Base   string // the swarm's base branch
}

func (e *BranchViolation) Error() string {
	return fmt.Sprintf("branch %q is protected (main, master and the base branch %q are never dispatched to): name the agent's own branch, such as swarm/<agent>", e.Branch, e.Base)
}

// collector gathers field errors. Errors from the schema come first; a Go
// rule on a field the schema already refused (or on a field inside or around
// one) is dropped, so one mistake is reported once.
type collector struct {
	fields []FieldError
	schema int // fields[:schema] came from the JSON Schema
}

func (c *collector) add(path, reason string) {
	c.fields = append(c.fields, FieldError{Path: path, Reason: reason})
}

func (c *collector) addf(path, format string, args ...any) { c.add(path, fmt.Sprintf(format, args...)) }

func (c *collector) addErr(path, reason string, err error) {
	c.fields = append(c.fields, FieldError{Path: path, Reason: reason, Err: err})
}

// markSchema records that every error so far came from the schema.
func (c *collector) markSchema() { c.schema = len(c.fields) }

// failed reports whether the schema (or an earlier check marked as such)
// already refused path, something inside it, or something around it. Go
// rules call it first, to stay silent and to skip store lookups for values
// that are malformed anyway.
func (c *collector) failed(path string) bool {
	for _, f := range c.fields[:c.schema] {
		if related(f.Path, path) {
			return true
		}
	}
	return false
}

// failedAt reports whether some error names exactly path.
func (c *collector) failedAt(path string) bool {
	for _, f := range c.fields {
		if f.Path == path {
			return true
		}
	}
	return false
}

// failedAny is failed for any error, from the schema or from Go.
func (c *collector) failedAny(path string) bool {
	for _, f := range c.fields {
		if related(f.Path, path) {
			return true
		}
	}
	return false
}

func related(a, b string) bool {
	return a == b || within(a, b) || within(b, a)
}

// within reports whether path a is inside path b.
func within(a, b string) bool {
	if b == "" {
		return true
	}
	return strings.HasPrefix(a, b) && len(a) > len(b) && (a[len(b)] == '.' || a[len(b)] == '[')
}

func (c *collector) err(t Type) error {
	if len(c.fields) == 0 {
		return nil
	}
	fields := slices.Clone(c.fields)
	slices.SortStableFunc(fields, func(a, b FieldError) int { return comparePaths(a.Path, b.Path) })
	fields = slices.CompactFunc(fields, func(a, b FieldError) bool { return a.Path == b.Path && a.Reason == b.Reason })
	return &ValidationError{Type: t, Fields: fields}
}

var pathToken = regexp.MustCompile(`\[[0-9]+\]|\["(?:[^"\\]|\\.)*"\]|[^.\[]+`)

// comparePaths orders paths segment by segment, indexes numerically, so
// acceptance_criteria[2] comes before acceptance_criteria[10].
func comparePaths(a, b string) int {
	ta, tb := pathToken.FindAllString(a, -1), pathToken.FindAllString(b, -1)
	for i := 0; i < len(ta) && i < len(tb); i++ {
		x, y := ta[i], tb[i]
		if x == y {
			continue
		}
		nx, ex := index(x)
		ny, ey := index(y)
		if ex && ey {
			return cmp.Compare(nx, ny)
		}
		return strings.Compare(x, y)
	}
	return cmp.Compare(len(ta), len(tb))
}

func index(tok string) (int, bool) {
	if len(tok) < 3 || tok[0] != '[' || tok[1] == '"' {
		return 0, false
	}
	n, err := strconv.Atoi(tok[1 : len(tok)-1])
	return n, err == nil
}

// identifier reports whether key can follow a dot in a path.
func identifier(key string) bool {
	for i, r := range key {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return key != ""
}

// joinKey appends an object key to a path.
func joinKey(path, key string) string {
	if !identifier(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// joinIndex appends an array index to a path.
func joinIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
