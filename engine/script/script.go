// Package script is a deterministic engine.Model for tests, the demo and
// `swarm up --engine script`. It drives the same agent loop and tools as the
// Gemini engine, so a scripted run exercises the real code: only the model
// is replaced by a file.
//
// A script is a TOML file, by default .swarm/scripts/<agent>.toml (or the
// agent's `script = "path"`):
//
//	after = "end"            # or "repeat" or "mail"; default "end"
//
//	[[session]]              # session 1 plays the first block
//	[[session.turn]]
//	wait = "2s"              # optional pause before the turn
//	tool = "bash"
//	args = { command = "sleep 60" }
//	[[session.turn]]
//	text = "done"
//
// Session N plays block N. Text turns followed by a tool turn are one model
// turn (text, then the call); consecutive tool turns are separate model
// turns; a final text turn, or running out of turns, ends the session with
// Success. After the last block, "end" means the agent has no work of its
// own (HasWork is false, so it goes Idle), and a session that runs anyway
// (mail woke it) plays the built-in script; "repeat" starts again at block 1
// and always has work; "mail" plays the blocks round and round too, but
// only in sessions something else starts (mail, a workflow's turn), so one
// block can be an agent that reacts to each message it gets; mail never
// joins its running session, it starts the next one.
//
// With no file, the built-in script acknowledges the session's mail in one
// text turn ("Read 2 message(s) from lead, operator.") and ends. It never
// replies, so two scripted agents cannot ping-pong.
//
// Text and string arguments may use ${mail.latest.id} and
// ${mail.latest.from}: the id and sender of the newest message delivered
// into the session (empty when there is none), so a script can reply in a
// thread: args = { to = "${mail.latest.from}", body = "on it",
// reply_to = "${mail.latest.id}" }.
//
// Token usage is faked deterministically from the sizes of the request and
// the reply (about four bytes a token).
package script

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/swarmhq/swarm/engine"
)

// Name is the built-in engine's name.
const Name = "script"

// Options configure the script engine.
type Options struct {
	// Name is the engine's configured name; "script" when empty.
	Name string
	// Root is the repository root. Scripts are looked for in
	// <Root>/.swarm/scripts unless Dir is set. When empty, a session's
	// Root is used and remembered for HasWork.
	Root string
	// Dir overrides the scripts directory.
	Dir string
	// Paths are explicit per-agent script files (config Agent.Script).
	// A missing explicit file is an error; a missing default file means
	// the built-in script.
	Paths map[string]string
	// Wait pauses before a turn with a wait; it must return early with an
	// error when ctx is done. Tests inject it; nil waits on a real timer.
	Wait func(ctx context.Context, d time.Duration) error
	// Logger gets diagnostics; slog.Default() when nil.
	Logger *slog.Logger
}

// Engine runs scripted sessions through engine.Loop. It implements
// engine.Engine, engine.WorkSource and engine.Preflight.
type Engine struct {
	opts Options

	mu    sync.Mutex
	roots map[string]string // agent -> repo root seen in its last session
}

// New returns the script engine.
func New(opts Options) engine.Engine {
	if opts.Name == "" {
		opts.Name = Name
	}
	if opts.Wait == nil {
		opts.Wait = sleep
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Engine{opts: opts, roots: map[string]string{}}
}

// Name is the engine's configured name.
func (e *Engine) Name() string { return e.opts.Name }

// Run plays the session's block through the agent loop.
func (e *Engine) Run(ctx context.Context, s *engine.Session) engine.Result {
	if s.Root != "" {
		e.mu.Lock()
		e.roots[s.Agent] = s.Root
		e.mu.Unlock()
	}
	f, err := e.load(s.Agent, s.Root)
	if err != nil {
		if s.Log != nil {
			fmt.Fprintf(s.Log, "=== session %d of %s · engine %s\nscript error: %v\n", s.Seq, s.Agent, e.opts.Name, err)
		}
		return engine.Result{Outcome: engine.Failed, Err: err}
	}
	plan := e.plan(s.Agent, s.Root, f, s.Seq)
	if s.Log != nil {
		fmt.Fprintf(s.Log, "script: %s\n", plan)
	}
	block, ok := Block{}, false
	if f != nil {
		block, ok = f.Block(s.Seq)
	}
	if !ok {
		block = builtin(s.Mail)
	}
	// The session's model is Gemini's default, which a script does not
	// use: the log names none.
	s.Model = ""
	if f != nil && f.After == AfterMail {
		// A reactive agent answers the mail its session started with; mail
		// that comes meanwhile starts its next session rather than joining
		// this one, which a script could not read.
		s.Interject = nil
	}
	loop := &engine.Loop{EngineName: e.opts.Name, Model: &model{block: block, wait: e.opts.Wait}, Logger: e.opts.Logger}
	return loop.Run(ctx, s)
}

// Plan is which block of a script a session plays, for the session log
// and swarm doctor. Session N plays block N (N counts the agent's
// sessions over its lifetime), so blocks written after an agent has run
// play only once its sessions reach them.
type Plan struct {
	Agent string
	Seq   int64
	Path  string // the script file; "" for an agent with none
	// Exists is false when the file is the default one and is missing:
	// the built-in script plays.
	Exists bool
	Blocks int
	After  string
	// Block is the block session Seq plays, from 1; 0 means the built-in
	// script plays.
	Block int
}

// Past reports whether the session comes after the script's last block
// with after = "end": it plays the built-in script, which only reads the
// mail. Worth a warning: those blocks will not play again.
func (p Plan) Past() bool { return p.Exists && p.Block == 0 && p.Blocks > 0 }

func (p Plan) String() string {
	switch {
	case !p.Exists:
		return fmt.Sprintf("session %d of %s plays the built-in script (it reads its mail and ends): there is no %s", p.Seq, p.Agent, p.Path)
	case p.Blocks == 0:
		return fmt.Sprintf("session %d of %s plays the built-in script: %s has no [[session]] block", p.Seq, p.Agent, p.Path)
	case p.Past():
		return fmt.Sprintf("warning: session %d of %s is past the last of the %d block(s) of %s: the built-in script plays (it reads its mail and ends). Session N plays block N, and %s has run %d session(s) already: write the blocks to play next as block %d on, or set after = \"repeat\"",
			p.Seq, p.Agent, p.Blocks, p.Path, p.Agent, p.Seq-1, p.Seq)
	case int64(p.Block) != p.Seq:
		return fmt.Sprintf("session %d of %s plays block %d of %d of %s (after = %q)", p.Seq, p.Agent, p.Block, p.Blocks, p.Path, p.After)
	}
	return fmt.Sprintf("session %d of %s plays block %d of %d of %s", p.Seq, p.Agent, p.Block, p.Blocks, p.Path)
}

// Plan says which block session seq of agent plays. A script that cannot
// be read is an error, as it is for Run.
func (e *Engine) Plan(agent string, seq int64) (Plan, error) {
	e.mu.Lock()
	root := e.roots[agent]
	e.mu.Unlock()
	f, err := e.load(agent, root)
	if err != nil {
		return Plan{}, err
	}
	return e.plan(agent, root, f, seq), nil
}

func (e *Engine) plan(agent, root string, f *File, seq int64) Plan {
	if e.opts.Root != "" {
		root = e.opts.Root
	}
	p := Plan{Agent: agent, Seq: seq, Path: shorten(root, e.path(agent, root))}
	if f == nil {
		return p
	}
	p.Exists, p.Blocks, p.After, p.Path = true, len(f.Sessions), f.After, shorten(root, f.Path)
	if n := int64(len(f.Sessions)); n > 0 && seq >= 1 {
		switch {
		case seq <= n:
			p.Block = int(seq)
		case f.After == AfterRepeat || f.After == AfterMail:
			p.Block = int((seq-1)%n) + 1
		}
	}
	return p
}

// shorten names path from root when it is under it.
func shorten(root, path string) string {
	if root == "" {
		return path
	}
	if r, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(r) {
		return r
	}
	return path
}

// path is where the agent's script is looked for.
func (e *Engine) path(agent, root string) string {
	if p, ok := e.opts.Paths[agent]; ok && p != "" {
		return p
	}
	if dir := e.dir(root); dir != "" {
		return filepath.Join(dir, agent+".toml")
	}
	return agent + ".toml"
}

// HasWork reports whether the agent's script has a block for session seq.
// The built-in script never has work of its own. A script that cannot be
// read has none either (the error is logged, and Run reports it).
func (e *Engine) HasWork(agent string, seq int64) bool {
	e.mu.Lock()
	root := e.roots[agent]
	e.mu.Unlock()
	f, err := e.load(agent, root)
	if err != nil {
		e.opts.Logger.Warn("script engine: cannot read script", "agent", agent, "error", err)
		return false
	}
	return f != nil && f.HasWork(seq)
}

// Preflight parses every script the engine can find: the explicit paths
// and the *.toml files of the scripts directory, so a mistake is reported
// with its line before any session starts.
func (e *Engine) Preflight(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, agent := range slices.Sorted(maps.Keys(e.opts.Paths)) {
		p := e.opts.Paths[agent]
		seen[filepath.Clean(p)] = true
		if _, err := Load(p); err != nil {
			errs = append(errs, fmt.Errorf("script for agent %s: %w", agent, err))
		}
	}
	if dir := e.dir(e.opts.Root); dir != "" {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
		for _, p := range matches {
			if seen[filepath.Clean(p)] {
				continue
			}
			if _, err := Load(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (e *Engine) dir(root string) string {
	if e.opts.Dir != "" {
		return e.opts.Dir
	}
	if e.opts.Root != "" {
		root = e.opts.Root
	}
	if root == "" {
		return ""
	}
	return filepath.Join(root, ".swarm", "scripts")
}

// load returns the agent's script, nil when it has none (the built-in).
func (e *Engine) load(agent, root string) (*File, error) {
	if p, ok := e.opts.Paths[agent]; ok && p != "" {
		f, err := Load(p)
		if err != nil {
			return nil, fmt.Errorf("script for agent %s: %w", agent, err)
		}
		return f, nil
	}
	dir := e.dir(root)
	if dir == "" {
		return nil, nil
	}
	f, err := Load(filepath.Join(dir, agent+".toml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f, err
}

// builtin acknowledges the session's mail and ends; it never replies.
func builtin(mail []engine.Mail) Block {
	if len(mail) == 0 {
		return Block{Turns: []Turn{{Text: "No messages to read. Nothing to do."}}}
	}
	var from []string
	for _, m := range mail {
		if !slices.Contains(from, m.From) {
			from = append(from, m.From)
		}
	}
	return Block{Turns: []Turn{{Text: fmt.Sprintf("Read %d message(s) from %s.", len(mail), strings.Join(from, ", "))}}}
}

// model plays one block. It keeps no state between calls: the number of
// model turns already in the conversation says which step comes next, so
// the same conversation always gets the same reply.
type model struct {
	block Block
	wait  func(context.Context, time.Duration) error
}

// steps groups a block into model turns: any text turns and the tool turn
// that follows them, or the trailing text turns.
func steps(turns []Turn) [][]Turn {
	var out [][]Turn
	var cur []Turn
	for _, t := range turns {
		cur = append(cur, t)
		if t.Tool != "" {
			out = append(out, cur)
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (m *model) Generate(ctx context.Context, req engine.Request) (engine.Response, error) {
	done := 0
	for _, t := range req.Turns {
		if t.Role == engine.RoleModel {
			done++
		}
	}
	var mail []engine.Mail
	if req.Session != nil {
		mail = req.Session.Mail
	}
	sub := substituter(mail)
	var turn engine.Turn
	turn.Role = engine.RoleModel
	if st := steps(m.block.Turns); done < len(st) {
		for _, t := range st[done] {
			if t.Wait > 0 {
				if err := m.wait(ctx, t.Wait); err != nil {
					return engine.Response{}, err
				}
			}
			if t.Tool != "" {
				args, _ := substArgs(t.Args, sub).(map[string]any)
				turn.Parts = append(turn.Parts, engine.Part{Call: &engine.ToolCall{
					ID: fmt.Sprintf("script-%d", done+1), Name: t.Tool, Args: args,
				}})
			} else {
				turn.Parts = append(turn.Parts, engine.Part{Text: sub.Replace(t.Text)})
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return engine.Response{}, context.Cause(ctx)
	}
	return engine.Response{Turn: turn, Usage: usage(req, turn)}, nil
}

// usage fakes token counts from sizes, about four bytes a token.
func usage(req engine.Request, out engine.Turn) engine.Usage {
	tokens := func(n int) int64 { return int64(n+3) / 4 }
	in := len(req.System)
	for _, t := range req.Turns {
		in += partsSize(t.Parts)
	}
	return engine.Usage{InputTokens: tokens(in), OutputTokens: tokens(partsSize(out.Parts))}
}

func partsSize(parts []engine.Part) int {
	n := 0
	for _, p := range parts {
		n += len(p.Text)
		if p.Call != nil {
			b, _ := json.Marshal(p.Call.Args)
			n += len(p.Call.Name) + len(b)
		}
		if p.Result != nil {
			n += len(p.Result.Output) + len(p.Result.Error)
		}
	}
	return n
}

func substituter(mail []engine.Mail) *strings.Replacer {
	var id, from string
	var newest int64 = -1
	for _, m := range mail {
		if m.ID > newest {
			newest, id, from = m.ID, strconv.FormatInt(m.ID, 10), m.From
		}
	}
	return strings.NewReplacer(LatestMailID, id, LatestMailFrom, from)
}

// substArgs copies v with the placeholders replaced in every string, so
// the parsed file is never changed and the next session starts clean.
func substArgs(v any, r *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return r.Replace(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = substArgs(x, r)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = substArgs(x, r)
		}
		return out
	}
	return v
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

var _ interface {
	engine.Engine
	engine.WorkSource
	engine.Preflight
} = (*Engine)(nil)
