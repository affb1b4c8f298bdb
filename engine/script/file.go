package script

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/tomlfile"
)

// After values.
const (
	AfterEnd    = "end"
	AfterRepeat = "repeat"
	// AfterMail plays the blocks round and round like repeat, but only in
	// sessions something else starts (mail, a workflow's turn): the agent
	// has no work of its own. A reactive agent is one block that acts on
	// its mail.
	AfterMail = "mail"
)

// Placeholders a script may use in text and in string arguments.
const (
	LatestMailID   = "${mail.latest.id}"
	LatestMailFrom = "${mail.latest.from}"
)

// File is a parsed script.
type File struct {
	Path     string
	After    string // AfterEnd or AfterRepeat
	Sessions []Block
}

// Block is one [[session]]: the turns session N plays.
type Block struct {
	Turns []Turn
}

// Turn is one [[session.turn]]: a tool call or a text, with an optional
// pause before it.
type Turn struct {
	Wait time.Duration
	Tool string
	Args map[string]any
	Text string
	Line int // where the turn starts in the file, 0 if unknown
}

// Error is a problem in a script file, at a line when one is known.
type Error = tomlfile.Error

// unknownKeyHint says what a script may contain.
const unknownKeyHint = "a script has after and [[session]] blocks of [[session.turn]] entries with wait, tool, args or text"

type rawFile struct {
	After   *string      `toml:"after"`
	Session []rawSession `toml:"session"`
}

type rawSession struct {
	Turn []rawTurn `toml:"turn"`
}

type rawTurn struct {
	Wait *string        `toml:"wait"`
	Tool *string        `toml:"tool"`
	Args map[string]any `toml:"args"`
	Text *string        `toml:"text"`
}

// Load reads and parses the script at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return Parse(data, path)
}

// Parse parses a script held in memory; name is used in errors. Unknown
// keys, bad durations, unknown tools and unknown ${mail...} placeholders
// are errors with their line.
func Parse(data []byte, name string) (*File, error) {
	var raw rawFile
	lines, err := tomlfile.Decode(data, name, &raw, unknownKeyHint)
	if err != nil {
		return nil, err
	}
	var errs []error
	errorf := func(key, format string, a ...any) {
		errs = append(errs, &Error{File: name, Line: lines.Line(key), Msg: fmt.Sprintf(format, a...)})
	}
	f := &File{Path: name, After: AfterEnd}
	if raw.After != nil {
		switch *raw.After {
		case AfterEnd, AfterRepeat, AfterMail:
			f.After = *raw.After
		default:
			errorf("after", "after must be %q, %q or %q, got %q", AfterEnd, AfterRepeat, AfterMail, *raw.After)
		}
	}
	for i, rs := range raw.Session {
		var b Block
		for j, rt := range rs.Turn {
			at := fmt.Sprintf("session[%d].turn[%d]", i, j)
			t := Turn{Line: lines.Line(at), Args: rt.Args}
			if rt.Wait != nil {
				d, err := time.ParseDuration(*rt.Wait)
				switch {
				case err != nil:
					errorf(at+".wait", "bad wait %q: write it like \"500ms\", \"2s\" or \"1m\"", *rt.Wait)
				case d < 0:
					errorf(at+".wait", "wait %q must not be negative", *rt.Wait)
				}
				t.Wait = d
			}
			switch {
			case rt.Tool != nil && rt.Text != nil:
				errorf(at, "a turn has either tool or text, not both: split it into two [[session.turn]] entries")
			case rt.Tool == nil && rt.Text == nil:
				errorf(at, "a turn needs tool = \"...\" (with args) or text = \"...\"")
			case rt.Tool != nil:
				t.Tool = *rt.Tool
				if !slices.Contains(mode.AllTools, t.Tool) {
					errorf(at+".tool", "unknown tool %q (valid: %s)", t.Tool, strings.Join(mode.AllTools, ", "))
				}
				if t.Args == nil {
					t.Args = map[string]any{}
				}
			default:
				t.Text = *rt.Text
				if rt.Args != nil {
					errorf(at+".args", "args belong to a tool turn; this turn has text")
				}
			}
			for _, s := range append([]string{t.Text}, argStrings(t.Args)...) {
				if bad := unknownPlaceholder(s); bad != "" {
					errorf(at, "unknown placeholder %s (valid: %s, %s)", bad, LatestMailID, LatestMailFrom)
				}
			}
			b.Turns = append(b.Turns, t)
		}
		f.Sessions = append(f.Sessions, b)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

// Block returns the block session seq plays, or false when there is none
// (after the last block with after = "end", or a file without blocks).
func (f *File) Block(seq int64) (Block, bool) {
	n := int64(len(f.Sessions))
	switch {
	case n == 0 || seq < 1:
		return Block{}, false
	case seq <= n:
		return f.Sessions[seq-1], true
	case f.After == AfterRepeat || f.After == AfterMail:
		return f.Sessions[(seq-1)%n], true
	}
	return Block{}, false
}

// HasWork reports whether session seq has a block to play: never with
// after = "mail", whose sessions others start.
func (f *File) HasWork(seq int64) bool {
	if f.After == AfterMail {
		return false
	}
	_, ok := f.Block(seq)
	return ok
}

// unknownPlaceholder returns the first ${mail...} placeholder in s that is
// not a known one, so a typo is caught when the file is read, not when the
// script runs. Other ${...} (shell variables) are left alone.
func unknownPlaceholder(s string) string {
	for {
		i := strings.Index(s, "${mail.")
		if i < 0 {
			return ""
		}
		rest := s[i:]
		if !strings.HasPrefix(rest, LatestMailID) && !strings.HasPrefix(rest, LatestMailFrom) {
			if j := strings.IndexByte(rest, '}'); j >= 0 {
				return rest[:j+1]
			}
			return rest
		}
		s = rest[2:]
	}
}

func argStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, argStrings(v[k])...)
		}
		return out
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, argStrings(x)...)
		}
		return out
	}
	return nil
}
