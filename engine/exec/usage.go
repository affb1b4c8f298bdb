package exec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/swarmhq/swarm/engine"
)

// maxLine is the longest stdout line the meter and the renderer decode; a
// longer one (a huge tool result) is skipped. Usage events are small.
const maxLine = 8 << 20

// maxWhole is how much of stdout the meter keeps to read a CLI that prints
// one JSON document at the end (gemini -o json) instead of a stream.
const maxWhole = 4 << 20

// Meter adds up the token usage a CLI agent's stdout reports, as it comes.
// It reads the JSON events of the presets' CLIs, whichever the command:
//
//   - claude -p --output-format stream-json: every "assistant" event
//     carries its message's usage (repeated, and growing, for each content
//     block of one message id), and the final "result" event the
//     session's (modelUsage, summed over models, where present: it counts
//     the helper models too) and its cost, total_cost_usd. Cache writes and reads are
//     cache_creation_input_tokens and cache_read_input_tokens;
//     input_tokens excludes both.
//   - codex exec --json: "turn.completed" carries the turn's usage;
//     input_tokens includes cached_input_tokens, the cache read.
//   - gemini -o stream-json: the "result" event's stats (input_tokens
//     includes cached; output is total_tokens - input_tokens, so thoughts
//     count as output); gemini -o json: the stats block of the one
//     document, per model.
//
// Where the stream reports usage as it goes (claude per message, codex per
// turn), onUsage gets each increment at once; a final total larger than
// what was reported (the claude result) is reported as the rest when it
// arrives. Other output is ignored.
type Meter struct {
	mu       sync.Mutex
	onUsage  func(engine.Usage)
	line     []byte
	skipping bool // the current line is over maxLine
	whole    []byte
	wholeOK  bool // whole holds all of stdout so far
	seen     bool // some event reported usage
	total    engine.Usage
	messages map[string]engine.Usage // claude: usage by message id
	turns    int                     // claude's num_turns, or codex's turns completed
}

// NewMeter returns a Meter that calls onUsage (may be nil) with each
// increment.
func NewMeter(onUsage func(engine.Usage)) *Meter {
	return &Meter{onUsage: onUsage, wholeOK: true, messages: map[string]engine.Usage{}}
}

// Write takes the next bytes of stdout. It never fails.
func (m *Meter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.wholeOK {
		if len(m.whole)+len(p) <= maxWhole {
			m.whole = append(m.whole, p...)
		} else {
			m.wholeOK, m.whole = false, nil
		}
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !m.skipping {
			if len(m.line)+len(chunk) > maxLine {
				m.skipping, m.line = true, m.line[:0]
			} else {
				m.line = append(m.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !m.skipping {
			m.event(m.line)
		}
		m.line, m.skipping = m.line[:0], false
		rest = rest[i+1:]
	}
	return len(p), nil
}

// Usage is the session's usage: everything reported, with the last line
// read even without its newline, or the stats of a single JSON document.
func (m *Meter) Usage() engine.Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.line) > 0 && !m.skipping {
		m.event(m.line)
		m.line = m.line[:0]
	}
	if !m.seen && m.wholeOK {
		var doc struct {
			Stats *geminiStats `json:"stats"`
		}
		if json.Unmarshal(m.whole, &doc) == nil && doc.Stats != nil {
			m.seen = true
			m.add(doc.Stats.models())
		}
		m.whole, m.wholeOK = nil, false
	}
	return m.total
}

// FormatUsage is usage as the session log and swarm logs print it:
// "tokens 1200 in, 340 out, cache 5000 written, 90000 read, cost $0.0412".
func FormatUsage(u engine.Usage) string {
	s := fmt.Sprintf("tokens %d in, %d out", u.InputTokens, u.OutputTokens)
	if u.CacheWrite != 0 || u.CacheRead != 0 {
		s += fmt.Sprintf(", cache %d written, %d read", u.CacheWrite, u.CacheRead)
	}
	if u.Costed {
		s += fmt.Sprintf(", cost $%.4f", u.CostUSD)
	}
	return s
}

// tokens is a usage object of any of the CLIs.
type tokens struct {
	Input       int64 `json:"input_tokens"`
	Output      int64 `json:"output_tokens"`
	CacheCreate int64 `json:"cache_creation_input_tokens"` // claude
	CacheRead   int64 `json:"cache_read_input_tokens"`     // claude
	CachedInput int64 `json:"cached_input_tokens"`         // codex
}

func (t tokens) claude() engine.Usage {
	return engine.Usage{InputTokens: t.Input, OutputTokens: t.Output, CacheWrite: t.CacheCreate, CacheRead: t.CacheRead}
}

func (t tokens) codex() engine.Usage {
	return engine.Usage{InputTokens: max(t.Input-t.CachedInput, 0), OutputTokens: t.Output, CacheRead: t.CachedInput}
}

// claudeModelUsage is one model's entry of a claude result's modelUsage.
type claudeModelUsage struct {
	Input       int64 `json:"inputTokens"`
	Output      int64 `json:"outputTokens"`
	CacheRead   int64 `json:"cacheReadInputTokens"`
	CacheCreate int64 `json:"cacheCreationInputTokens"`
}

// geminiStats is gemini-cli's stats: the stream's flat form, or -o json's
// per model.
type geminiStats struct {
	Total  int64  `json:"total_tokens"`
	Input  int64  `json:"input_tokens"` // the prompt, cached included
	Output int64  `json:"output_tokens"`
	Cached int64  `json:"cached"`
	Fresh  *int64 `json:"input"` // the prompt minus cached
	Models map[string]struct {
		Tokens struct {
			Input      *int64 `json:"input"`
			Prompt     int64  `json:"prompt"`
			Candidates int64  `json:"candidates"`
			Thoughts   int64  `json:"thoughts"`
			Cached     int64  `json:"cached"`
		} `json:"tokens"`
	} `json:"models"`
}

// stream is the usage of a stream-json result's stats.
func (g *geminiStats) stream() engine.Usage {
	u := engine.Usage{InputTokens: max(g.Input-g.Cached, 0), OutputTokens: g.Output, CacheRead: g.Cached}
	if g.Fresh != nil {
		u.InputTokens = *g.Fresh
	}
	if g.Total-g.Input > g.Output {
		u.OutputTokens = g.Total - g.Input
	}
	return u
}

// models is the usage of -o json's per-model stats.
func (g *geminiStats) models() engine.Usage {
	var u engine.Usage
	for _, m := range g.Models {
		t := m.Tokens
		in := max(t.Prompt-t.Cached, 0)
		if t.Input != nil {
			in = *t.Input
		}
		u = u.Add(engine.Usage{InputTokens: in, OutputTokens: t.Candidates + t.Thoughts, CacheRead: t.Cached})
	}
	return u
}

// usageEvent is the part of an event of any of the CLIs the meter reads.
type usageEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string  `json:"id"`
		Usage *tokens `json:"usage"`
	} `json:"message"`
	Usage      *tokens                     `json:"usage"`
	ModelUsage map[string]claudeModelUsage `json:"modelUsage"`
	Stats      *geminiStats                `json:"stats"`
	CostUSD    *float64                    `json:"total_cost_usd"` // claude's result
	NumTurns   int                         `json:"num_turns"`
}

// Turns is how many model turns the CLI reported: claude's result says
// (num_turns), codex's turn.completed events count; 0 when the CLI does
// not say (gemini).
func (m *Meter) Turns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.turns
}

func (m *Meter) event(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return
	}
	// Cheap test first: most lines (text, tool output) carry no usage.
	if !bytes.Contains(line, []byte(`"usage"`)) && !bytes.Contains(line, []byte(`"stats"`)) && !bytes.Contains(line, []byte(`"total_cost_usd"`)) {
		return
	}
	var ev usageEvent
	if json.Unmarshal(line, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "assistant" && ev.Message != nil && ev.Message.Usage != nil:
		// claude repeats a message's usage on each of its content blocks,
		// and the counts can grow: report only what is new.
		u := ev.Message.Usage.claude()
		prev := m.messages[ev.Message.ID]
		m.messages[ev.Message.ID] = maxUsage(prev, u)
		m.add(minus(u, prev))
	case ev.Type == "result" && ev.Stats != nil: // gemini stream-json
		m.add(ev.Stats.stream())
	case ev.Type == "result" && (ev.Usage != nil || len(ev.ModelUsage) > 0 || ev.CostUSD != nil): // claude
		m.turns = max(m.turns, ev.NumTurns)
		final := m.total
		switch {
		case len(ev.ModelUsage) > 0:
			final = sumModelUsage(ev.ModelUsage)
		case ev.Usage != nil:
			final = ev.Usage.claude()
		}
		// The result is the session's total: report what the messages
		// did not, and the session's cost, which only the result has.
		inc := minus(final, m.total)
		if ev.CostUSD != nil && *ev.CostUSD >= 0 {
			inc.CostUSD, inc.Costed = max(*ev.CostUSD-m.total.CostUSD, 0), true
		}
		m.add(inc)
	case ev.Type == "turn.completed" && ev.Usage != nil: // codex
		m.turns++
		m.add(ev.Usage.codex())
	}
}

// add counts an increment and reports it.
func (m *Meter) add(u engine.Usage) {
	m.seen = true
	if u.IsZero() {
		return
	}
	m.total = m.total.Add(u)
	if m.onUsage != nil {
		m.onUsage(u)
	}
}

// minus is a - b field by field, never below zero.
func minus(a, b engine.Usage) engine.Usage {
	return engine.Usage{
		InputTokens:  max(a.InputTokens-b.InputTokens, 0),
		OutputTokens: max(a.OutputTokens-b.OutputTokens, 0),
		CacheWrite:   max(a.CacheWrite-b.CacheWrite, 0),
		CacheRead:    max(a.CacheRead-b.CacheRead, 0),
	}
}

func maxUsage(a, b engine.Usage) engine.Usage {
	return engine.Usage{
		InputTokens:  max(a.InputTokens, b.InputTokens),
		OutputTokens: max(a.OutputTokens, b.OutputTokens),
		CacheWrite:   max(a.CacheWrite, b.CacheWrite),
		CacheRead:    max(a.CacheRead, b.CacheRead),
	}
}
