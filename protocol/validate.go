package protocol

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Resolver answers what validation needs from the store and the
// repository. References must name stored messages and commits must exist:
// nothing in a message may be invented. Every method returns an error only
// when it cannot answer (the database is locked, git failed); that error
// aborts the check and is returned as is, never as a ValidationError, since
// it is not the sender's fault.
type Resolver interface {
	// MessageExists reports whether a protocol message with this msg_id is
	// stored. Build also uses it to keep msg_ids unique.
	MessageExists(ctx context.Context, msgID string) (bool, error)
	// Lookup returns the stored protocol message with this msg_id; ok is
	// false when there is none.
	Lookup(ctx context.Context, msgID string) (s Stored, ok bool, err error)
	// CommitExists reports whether the repository has this commit. hash
	// is lower-case hex, 7 to 64 digits, and may be abbreviated.
	CommitExists(ctx context.Context, hash string) (bool, error)
}

// Stored is what the rules need to know about a stored protocol message.
type Stored struct {
	MsgID       string
	Type        Type
	From        string
	To          string
	TaskID      string
	RequiresAck bool
}

// StoredOf returns the Stored view of an envelope, for resolvers that keep
// envelopes (and for tests).
func StoredOf(e Envelope) Stored {
	return Stored{MsgID: e.MsgID, Type: e.Type, From: e.From, To: e.To, TaskID: e.TaskID, RequiresAck: e.RequiresAck}
}

// Builder builds and validates protocol messages. It holds no state of its
// own, so one Builder may be used concurrently if its Resolver may.
type Builder struct {
	// Resolver answers lookups in the store and the repository. Required.
	Resolver Resolver
	// BaseBranch is the swarm's base branch, which, like main and master,
	// no dispatch may name.
	BaseBranch string
	// Now is the clock; nil means time.Now. Tests inject a fake.
	Now func() time.Time
}

var errNoResolver = errors.New("protocol: the Builder has no Resolver; give it one that reads the store")

func (b *Builder) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Validate checks a whole envelope, as stored or as received from outside
// (a peer, an import), against its type's schema and the rules. It returns
// the decoded envelope, and a *ValidationError listing every failing field,
// or another error when the Resolver could not answer. Besides what Build
// checks, it checks the computed fields against each other: msg_id must be
// {type}-{task_id}-{unix ms of timestamp}.
func (b *Builder) Validate(ctx context.Context, data []byte) (Envelope, error) {
	if b.Resolver == nil {
		return Envelope{}, errNoResolver
	}
	var c collector
	env, err := b.check(ctx, &c, data, true)
	if err != nil {
		return env, err
	}
	return env, c.err(env.Type)
}

// check runs every check on an envelope's bytes into c. consistency adds
// the checks between computed fields, which Build needs not run on the
// fields it just computed.
func (b *Builder) check(ctx context.Context, c *collector, data []byte, consistency bool) (Envelope, error) {
	if !utf8.Valid(data) {
		c.add("envelope", "is not valid UTF-8")
		return Envelope{}, nil
	}
	// Before anything recurses over it: 5,000 levels break jq on every
	// reader of the stored message.
	if d := nesting(data) - 1; d > MaxDepth {
		c.addf("payload", "nests %d levels deep, more than %d: flatten it", d, MaxDepth)
		return Envelope{}, nil
	}
	doc, err := decodeJSON(data)
	if err != nil {
		c.add("envelope", "is not valid JSON: "+err.Error())
		return Envelope{}, nil
	}
	duplicateKeys(c, data)
	t := Type("")
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["type"].(string); ok && Type(s).Valid() {
			t = Type(s)
		}
	}
	checkSchema(c, t, doc)
	var env Envelope
	plainInts(c, doc, "", &env)
	c.markSchema()
	decodeInto(c, "", data, &env)
	if len(env.Payload) > MaxPayload && !c.failedAt("payload") {
		c.addf("payload", "is %d bytes, the limit is %d (1 MiB); put large content in a file in the repository and give its path", len(env.Payload), MaxPayload)
	}
	if t == "" {
		return env, nil // the schema reported the type; no rules apply to an unknown one
	}
	if err := b.envelopeRules(ctx, c, env, consistency); err != nil {
		return env, err
	}
	if c.failedAt("payload") {
		return env, nil // not an object, or too big: nothing to check inside
	}
	p := newPayload(t)
	plainInts(c, doc.(map[string]any)["payload"], "payload", p)
	decodeInto(c, "payload", env.Payload, p)
	return env, b.payloadRules(ctx, c, env, p)
}

// decodeInto decodes data into v. The schema ran first, so an error here
// is on a field it already refused, or an integer written as 1.0 or 1e3,
// which JSON Schema counts as an integer but Go cannot hold; plainInts
// reports those by name. Anything else would be a schema that lets through
// what the Go types cannot hold, which is a bug, reported rather than lost.
func decodeInto(c *collector, prefix string, data []byte, v any) {
	if err := json.Unmarshal(data, v); err != nil && len(c.fields) == 0 {
		c.addf(cmp.Or(prefix, "envelope"), "cannot be read: %v", err)
	}
}

// plainInts reports the integer fields of v's struct type (at prefix in
// doc) that are written with a decimal point or an exponent.
func plainInts(c *collector, doc any, prefix string, v any) {
	obj, ok := doc.(map[string]any)
	if !ok {
		return
	}
	rt := reflect.TypeOf(v)
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type.Kind() != reflect.Int {
			continue
		}
		name := jsonName(f)
		n, ok := obj[name].(json.Number)
		p := joinKey(prefix, name)
		if ok && strings.ContainsAny(string(n), ".eE") && !c.failedAny(p) {
			c.add(p, "must be a whole number written plainly, such as 3 (no decimal point or exponent)")
		}
	}
}

func (b *Builder) envelopeRules(ctx context.Context, c *collector, env Envelope, consistency bool) error {
	if consistency && !c.failed("timestamp") {
		ts, err := env.Time()
		switch {
		case err != nil:
			c.addf("timestamp", "is not a real time: %v", err)
		case !c.failed("msg_id") && !c.failed("task_id") && !c.failed("type"):
			if want := MsgID(env.Type, env.TaskID, ts); env.MsgID != want {
				c.addf("msg_id", "must be %q, {type}-{task_id}-{unix ms of timestamp}; it is computed, never typed", want)
			}
		}
	}
	if !c.failed("requires_ack") && !c.failed("ack_timeout_sec") {
		switch {
		case env.Type == TypeAck && env.RequiresAck:
			c.add("requires_ack", "must be false: an ack is never acknowledged")
		case env.RequiresAck && env.AckTimeoutSec == 0:
			c.add("ack_timeout_sec", "must be at least 1 when requires_ack is true")
		case !env.RequiresAck && env.AckTimeoutSec != 0:
			c.add("ack_timeout_sec", "must be 0 when requires_ack is false")
		}
	}
	for i, ref := range env.ContextRef {
		p := joinIndex("context_ref", i)
		if c.failed(p) {
			continue
		}
		ok, err := b.Resolver.MessageExists(ctx, ref)
		if err != nil {
			return fmt.Errorf("protocol: checking %s %q: %w", p, ref, err)
		}
		if !ok {
			c.addf(p, "no stored message has msg_id %q; refer only to messages that exist (swarm protocol log --task %s lists them)", ref, env.TaskID)
		}
	}
	return nil
}

func (b *Builder) payloadRules(ctx context.Context, c *collector, env Envelope, p Payload) error {
	switch p := p.(type) {
	case *TaskDispatch:
		notBlank(c, "payload.description", p.Description, "say what to do")
		b.branchRule(c, p.Branch)
		nonEmptyList(c, "payload.acceptance_criteria", p.AcceptanceCriteria, "list how the result will be judged")
		oneOf(c, "payload.risk_level", p.RiskLevel, "low", "medium", "high")
		seen := map[string]int{}
		for i, s := range p.Subtasks {
			sp := joinIndex("payload.subtasks", i)
			notBlank(c, sp+".subtask_id", s.SubtaskID, "give each subtask an id")
			notBlank(c, sp+".description", s.Description, "say what the subtask is")
			if j, dup := seen[s.SubtaskID]; dup && !c.failed(sp+".subtask_id") {
				c.addf(sp+".subtask_id", "repeats %q from subtasks[%d]; give each subtask its own id", s.SubtaskID, j)
			} else if !dup {
				seen[s.SubtaskID] = i
			}
		}
		for i, s := range p.ForbiddenActions {
			notBlank(c, joinIndex("payload.forbidden_actions", i), s, "remove it or say what is forbidden")
		}
	case *TaskResult:
		oneOf(c, "payload.status", p.Status, "completed", "failed", "blocked")
		notBlank(c, "payload.summary", p.Summary, "say what was done")
		if p.CommitHash != "" && !c.failed("payload.commit_hash") {
			ok, err := b.Resolver.CommitExists(ctx, p.CommitHash)
			if err != nil {
				return fmt.Errorf("protocol: checking payload.commit_hash %q: %w", p.CommitHash, err)
			}
			if !ok {
				c.addf("payload.commit_hash", "no commit %s in the repository; commit first, then give the hash git rev-parse HEAD prints", p.CommitHash)
			}
		}
		for i, s := range p.Artifacts {
			notBlank(c, joinIndex("payload.artifacts", i), s, "give a path in the repository")
		}
	case *ReviewRequest:
		if err := b.refRule(ctx, c, "payload.original_dispatch_ref", p.OriginalDispatchRef, TypeTaskDispatch, env.TaskID); err != nil {
			return err
		}
		if err := b.refRule(ctx, c, "payload.task_result_ref", p.TaskResultRef, TypeTaskResult, env.TaskID); err != nil {
			return err
		}
		nonEmptyList(c, "payload.acceptance_criteria", p.AcceptanceCriteria, "copy them from the dispatch")
	case *ReviewVerdict:
		oneOf(c, "payload.verdict", p.Verdict, "approved", "rejected")
		if p.Verdict == "rejected" && len(p.Issues) == 0 && !c.failed("payload.issues") {
			c.add("payload.issues", "must list at least 1 issue when the verdict is rejected: say what must change")
		}
		for i, s := range p.Issues {
			notBlank(c, joinIndex("payload.issues", i), s, "say what must change")
		}
	case *Escalation:
		notBlank(c, "payload.reason", p.Reason, "name the problem")
		notBlank(c, "payload.summary", p.Summary, "say what happened and what you need")
	case *Ack:
		return b.ackRule(ctx, c, env, p.AckOf)
	case *Ping:
		// The schema says it all: an upper-case code, and task_id team-<name>.
	}
	return nil
}

func notBlank(c *collector, path, s, todo string) {
	if strings.TrimSpace(s) == "" && !c.failed(path) {
		c.add(path, "must not be blank: "+todo)
	}
}

func nonEmptyList(c *collector, path string, items []string, todo string) {
	if len(items) == 0 && !c.failed(path) {
		c.add(path, "must contain at least 1 item: "+todo)
	}
	for i, s := range items {
		notBlank(c, joinIndex(path, i), s, "remove it or write it out")
	}
}

func oneOf(c *collector, path, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	if !c.failed(path) {
		c.addf(path, "must be one of %s, not %q", strings.Join(allowed, ", "), s)
	}
}

// branchRule refuses a protected branch. Agents commit only on their own
// branches; a dispatch to main would make the recipient commit there.
func (b *Builder) branchRule(c *collector, branch string) {
	const p = "payload.branch"
	if c.failed(p) {
		return
	}
	name := strings.TrimPrefix(strings.TrimSpace(branch), "refs/heads/")
	if name == "" {
		c.add(p, "must not be blank: name the agent's own branch, such as swarm/<agent>")
		return
	}
	// Case-insensitive: on macOS "Main" is the same ref file as "main".
	for _, protected := range []string{"main", "master", b.BaseBranch} {
		if protected != "" && strings.EqualFold(name, protected) {
			v := &BranchViolation{Branch: branch, Base: b.BaseBranch}
			c.addErr(p, v.Error(), v)
			return
		}
	}
	if why := badRefName(name); why != "" {
		c.addf(p, "is not a valid git branch name: %s", why)
	}
}

// badRefName says why git would refuse name as a branch (see
// git-check-ref-format), or returns "".
func badRefName(name string) string {
	switch {
	case strings.HasPrefix(name, "-"):
		return "it starts with '-'"
	case strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return "it starts or ends with '/'"
	case strings.HasSuffix(name, "."):
		return "it ends with '.'"
	case strings.Contains(name, "//"):
		return "it contains '//'"
	case strings.Contains(name, ".."):
		return "it contains '..'"
	case strings.Contains(name, "@{") || name == "@":
		return "it contains '@{' or is '@'"
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return fmt.Sprintf("it contains %q", r)
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") || strings.HasSuffix(part, ".lock") {
			return "a part starts with '.' or ends with '.lock'"
		}
	}
	return ""
}

// refRule checks a *_ref: it must name a stored message of the wanted type
// about the same task.
func (b *Builder) refRule(ctx context.Context, c *collector, path, ref string, want Type, task string) error {
	if c.failed(path) {
		return nil
	}
	s, ok, err := b.Resolver.Lookup(ctx, ref)
	if err != nil {
		return fmt.Errorf("protocol: checking %s %q: %w", path, ref, err)
	}
	switch {
	case !ok:
		c.addf(path, "no stored message has msg_id %q; refer only to messages that exist (swarm protocol log --task %s lists them)", ref, task)
	case s.Type != want:
		c.addf(path, "names a %s; it must name the %s", s.Type, want)
	case s.TaskID != task && !c.failed("task_id"):
		c.addf(path, "is about task %s, not %s", s.TaskID, task)
	}
	return nil
}

// ackRule: an ACK answers a stored message that was addressed to the acker
// and asked for an ACK, and goes back to its sender about the same task.
func (b *Builder) ackRule(ctx context.Context, c *collector, env Envelope, ref string) error {
	const p = "payload.ack_of"
	if c.failed(p) {
		return nil
	}
	s, ok, err := b.Resolver.Lookup(ctx, ref)
	if err != nil {
		return fmt.Errorf("protocol: checking %s %q: %w", p, ref, err)
	}
	switch {
	case !ok:
		c.addf(p, "no stored message has msg_id %q; acknowledge a message you received (swarm inbox lists them)", ref)
		return nil
	case s.To != env.From:
		c.addf(p, "%s was sent to %s, not to %s; only its recipient acknowledges it", ref, s.To, env.From)
		return nil
	case !s.RequiresAck:
		c.addf(p, "%s does not ask for an ACK; nothing to acknowledge", ref)
		return nil
	}
	if env.To != s.From && !c.failed("to") {
		c.addf("to", "must be %s, who sent %s", s.From, ref)
	}
	if env.TaskID != s.TaskID && !c.failed("task_id") {
		c.addf("task_id", "must be %s, the task of %s", s.TaskID, ref)
	}
	return nil
}

// nesting is how deep data's arrays and objects nest, counting brackets
// outside strings (the envelope itself is 1).
func nesting(data []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range data {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// duplicateKeys refuses an object that gives a key twice. Decoders disagree
// on which one wins (Go takes the last, others the first), so a duplicate
// could make the checked value differ from the one a reader sees. data is
// known to be valid JSON; this is a small scanner rather than
// json.Decoder.Token, which cost a quarter of a validation.
func duplicateKeys(c *collector, data []byte) {
	d := dupScanner{c: c, data: data}
	d.value("")
}

type dupScanner struct {
	c    *collector
	data []byte
	i    int
}

func (d *dupScanner) ws() {
	for d.i < len(d.data) && (d.data[d.i] == ' ' || d.data[d.i] == '\t' || d.data[d.i] == '\n' || d.data[d.i] == '\r') {
		d.i++
	}
}

// str skips a string starting at d.i and returns its decoded value.
func (d *dupScanner) str() string {
	start := d.i
	d.i++ // the opening quote
	escaped := false
	for d.i < len(d.data) && d.data[d.i] != '"' {
		if d.data[d.i] == '\\' {
			escaped = true
			d.i++
		}
		d.i++
	}
	d.i++ // the closing quote
	raw := d.data[start:min(d.i, len(d.data))]
	// Unescaped valid UTF-8 is the key as it stands; otherwise decode it as
	// the decoder does (escapes, and invalid bytes as U+FFFD).
	if !escaped && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON, so it decodes
	return s
}

func (d *dupScanner) value(path string) {
	d.ws()
	if d.i >= len(d.data) {
		return
	}
	switch d.data[d.i] {
	case '{':
		d.i++
		var seen map[string]bool
		for {
			d.ws()
			if d.i >= len(d.data) || d.data[d.i] == '}' {
				d.i++
				return
			}
			if d.data[d.i] == ',' {
				d.i++
				d.ws()
			}
			k := d.str()
			kp := joinKey(path, k)
			if seen[k] {
				d.c.add(kp, "is given twice; give each field once")
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[k] = true
			d.ws()
			d.i++ // the colon
			d.value(kp)
		}
	case '[':
		d.i++
		for n := 0; ; n++ {
			d.ws()
			if d.i >= len(d.data) || d.data[d.i] == ']' {
				d.i++
				return
			}
			if d.data[d.i] == ',' {
				d.i++
			}
			d.value(joinIndex(path, n))
		}
	case '"':
		d.str()
	default: // a number, true, false or null
		for d.i < len(d.data) && !strings.ContainsRune(",]} \t\r\n", rune(d.data[d.i])) {
			d.i++
		}
	}
}

// MsgID computes a msg_id: {type}-{task_id}-{unix_ms}.
func MsgID(t Type, taskID string, at time.Time) string {
	return string(t) + "-" + taskID + "-" + strconv.FormatInt(at.UnixMilli(), 10)
}

// Timestamp formats a time as envelopes carry it.
func Timestamp(at time.Time) string { return at.UTC().Format(TimestampLayout) }

// decodeJSON decodes one JSON value as the schema check reads it: numbers
// kept exactly (json.Number), and nothing after the value.
func decodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return doc, nil
}
