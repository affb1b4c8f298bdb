package gemini

import (
	"context"
	"fmt"

	"github.com/swarmhq/swarm/engine"
)

// Engine is the gemini engine: the shared agent loop over a Model, plus a
// Preflight that reports a missing key before any session starts.
type Engine struct {
	name  string
	model *Model
	loop  *engine.Loop
	err   error // from New; reported by Preflight and every Run
}

var (
	_ engine.Engine    = (*Engine)(nil)
	_ engine.Preflight = (*Engine)(nil)
)

// NewEngine returns the engine named name (gemini, or an [engine.NAME]
// table's name). A configuration error (no key, a bad base URL) does not
// fail here: Preflight reports it, and Run fails with it.
func NewEngine(name string, opts Options) *Engine {
	e := &Engine{name: name}
	m, err := New(opts)
	if err != nil {
		e.err = fmt.Errorf("engine %s: %w", name, err)
		return e
	}
	e.model = m
	e.loop = &engine.Loop{EngineName: name, Model: m, Logger: opts.Logger}
	return e
}

// Name is the engine's configured name.
func (e *Engine) Name() string { return e.name }

// Model is the engine's model, nil when the configuration was refused.
func (e *Engine) Model() *Model { return e.model }

// Preflight reports what New refused: a missing API key names both
// variables. It makes no network call.
func (e *Engine) Preflight(context.Context) error { return e.err }

// Run runs one session on the agent loop.
func (e *Engine) Run(ctx context.Context, s *engine.Session) engine.Result {
	if e.err != nil {
		return engine.Result{Outcome: engine.Failed, Err: e.err}
	}
	return e.loop.Run(ctx, s)
}
