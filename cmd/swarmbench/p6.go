package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/identity"
	"github.com/swarmhq/swarm/repo"
	"github.com/swarmhq/swarm/swarm"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/swarmhq/swarm/config"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
)

type p6Mode struct {
	Mode   string `json:"mode"`
	Bytes  int    `json:"bytes"`
	Tokens int    `json:"tokens_estimate"`
	// WithBeads is the same prompt when bd is installed (the mode's
	// beads tools are listed).
	BytesWithBeads  int `json:"bytes_with_beads"`
	TokensWithBeads int `json:"tokens_with_beads"`
}

// p6 renders the base prompt of each mode: session 1 of an agent with the
// starter file's role and one teammate, in a clean repository with no
// AGENTS.md, no mail and no tasks. Tokens are estimated as chars/4, the rule
// DESIGN §5 budgets with.
func (b *bench) p6(ctx context.Context) error {
	repo, err := b.newRepo("p6", 3, 512)
	if err != nil {
		return err
	}
	starter, err := config.Parse(config.Starter(), "swarm.toml", repo)
	if err != nil {
		return err
	}
	a := starter.Agents[0]
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	builder := &promptpipe.Builder{Config: starter.Prompt, Logger: quiet, Now: time.Now}
	var out []p6Mode
	for _, name := range mode.Names() {
		m := mode.Mode(name)
		// The profiles (code, review, delegate) take their kind's default
		// strategy; execute and coordinate are rendered with each of theirs.
		strategies := []mode.Strategy{""}
		if m.Profile() == "" {
			strategies = m.Kind().Strategies()
		}
		for _, strategy := range strategies {
			label := name
			if strategy != "" {
				label += "/" + string(strategy)
			}
			pc := promptpipe.PromptContext{
				Agent: a.Name, Role: a.Role, Mode: m, Strategy: strategy, SessionID: a.Name + "-1", SessionSeq: 1,
				DBPath: filepath.Join(repo, ".swarm", "swarm.db"), Worktree: repo, Root: repo,
				Branch: "swarm/" + a.Name, BaseBranch: "main", Teammates: []string{"frontend"},
			}
			if strategy == mode.Tree {
				pc.TreeRoot = "bd-1"
			}
			p, err := builder.Build(ctx, pc)
			if err != nil {
				return err
			}
			pc.Beads = true
			pb, err := builder.Build(ctx, pc)
			if err != nil {
				return err
			}
			r := p6Mode{Mode: label, Bytes: len(p.Text), Tokens: p.TokensEstimate, BytesWithBeads: len(pb.Text), TokensWithBeads: pb.TokensEstimate}
			// chars/4, counting characters (runes), not bytes: the prompt
			// has a few non-ASCII ones (arrows, dashes).
			if chars := utf8.RuneCountInString(p.Text); r.Tokens != chars/4 && r.Tokens != (chars+3)/4 {
				return fmt.Errorf("TokensEstimate %d is not chars/4 of %d characters", r.Tokens, chars)
			}
			out = append(out, r)
			b.check(row{ID: "P6", Figure: fmt.Sprintf("base prompt, mode %s (with bd tools: %d B, %d tokens)", label, r.BytesWithBeads, r.TokensWithBeads),
				Value: float64(r.Tokens), Unit: "tokens", Text: fmt.Sprintf("%s B, %d tokens", thousands(float64(r.Bytes)), r.Tokens)},
				"< 2,000 tokens", r.TokensWithBeads < 2000)
		}
	}
	b.details["P6"] = out
	return b.p6Exec(ctx, builder, repo, a)
}

// p6Exec renders the base prompt of an agent on an exec preset (code and
// review on claude, whose section 3 names its own tools and the swarm MCP
// server's), and measures what the MCP tool definitions add to every
// model request: the real `swarm mcp`'s tools as a client lists them,
// marshalled as a CLI sends them, chars/4 (DESIGN §9.6).
func (b *bench) p6Exec(ctx context.Context, builder *promptpipe.Builder, repo string, a config.Agent) error {
	eng, err := execengine.New(execengine.Options{Name: "claude", Preset: "claude"})
	if err != nil {
		return err
	}
	for _, m := range []mode.Mode{mode.Code, mode.Review} {
		v := mode.Spec{Mode: m}.Vector()
		cli := eng.CLITools(v)
		pc := promptpipe.PromptContext{
			Agent: a.Name, Role: a.Role, Mode: m, SessionID: a.Name + "-1", SessionSeq: 1,
			DBPath: filepath.Join(repo, ".swarm", "swarm.db"), Worktree: repo, Root: repo,
			Branch: "swarm/" + a.Name, BaseBranch: "main", Teammates: []string{"frontend"}, Beads: true, CLI: &cli,
		}
		p, err := builder.Build(ctx, pc)
		if err != nil {
			return err
		}
		b.check(row{ID: "P6", Figure: fmt.Sprintf("base prompt, exec agent on claude, mode %s (with bd)", m),
			Value: float64(p.TokensEstimate), Unit: "tokens", Text: fmt.Sprintf("%s B, %d tokens", thousands(float64(len(p.Text))), p.TokensEstimate)},
			"< 2,000 tokens", p.TokensEstimate < 2000)
	}

	dir, err := b.newSwarm("p6mcp", []string{"backend"}, "", 3)
	if err != nil {
		return err
	}
	// swarm mcp serves a session through its door: a door like the
	// supervisor's, whose commands the bench runs with the binary (the
	// server only reads the agent's capabilities through it).
	door, stopDoor, err := b.benchDoor(ctx, dir, "backend")
	if err != nil {
		return err
	}
	defer stopDoor()
	cmd := exec.Command(b.bin, "mcp")
	cmd.Dir = dir
	cmd.Env = b.env("SWARM_AGENT=backend", "SWARM_SESSION_ID=backend-1", "SWARM_ROOT="+dir, control.DoorEnv+"="+door)
	client := mcp.NewClient(&mcp.Implementation{Name: "swarmbench", Version: "v0"}, nil)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("swarm mcp: %w", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(cctx, nil)
	if err != nil {
		return fmt.Errorf("swarm mcp: list tools: %w", err)
	}
	var defs []map[string]any
	for _, t := range res.Tools {
		defs = append(defs, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
	}
	js, err := json.Marshal(defs)
	if err != nil {
		return err
	}
	tokens := utf8.RuneCount(js) / 4
	b.details["P6_mcp"] = map[string]any{"tools": len(defs), "bytes": len(js), "tokens_estimate": tokens}
	b.check(row{ID: "P6", Figure: fmt.Sprintf("swarm mcp tool definitions, execute/simple (%d tools, JSON as sent)", len(defs)),
		Value: float64(tokens), Unit: "tokens", Text: fmt.Sprintf("%s B, %d tokens", thousands(float64(len(js))), tokens)},
		"< 1,000 tokens", tokens < 1000)
	return nil
}

// benchDoor opens a session door for session 1 of agent in the swarm at
// dir, in this process, with the production door rules; the commands that
// come through it run as the bench's `swarm --dir dir` process.
func (b *bench) benchDoor(ctx context.Context, dir, agent string) (string, func(), error) {
	caller := identity.Session(agent, 1, mode.Spec{Mode: mode.Code}.Vector())
	srv, err := control.ListenDoor(repo.At(dir, ""), caller.SessionID())
	if err != nil {
		return "", nil, err
	}
	run := func(ctx context.Context, _ identity.Caller, req control.RunRequest) control.RunResult {
		cmd := exec.CommandContext(ctx, b.bin, append([]string{"--dir", dir}, req.Args...)...)
		cmd.Env = b.env()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := 0
		if err := cmd.Run(); err != nil {
			code = 1
		}
		return control.RunResult{Stdout: out.String(), Stderr: errb.String(), Code: code}
	}
	// swarm mcp reads the agent's capabilities with a typed status call at
	// start; the bench's door answers it with the command's --json, and
	// refuses the other verbs, which listing the tools never calls.
	call := func(ctx context.Context, c identity.Caller, req control.CallRequest) (control.RunResult, error) {
		if req.Verb != "status" {
			return control.RunResult{}, fmt.Errorf("the bench's door serves only the status verb, not %q", req.Verb)
		}
		return run(ctx, c, control.RunRequest{Args: []string{"status", "--json"}}), nil
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(sctx, func(ctx context.Context, req control.Request, _ func(any) error) control.Response {
			return swarm.HandleDoorCall(ctx, caller, req, run, call)
		})
	}()
	return srv.Path(), func() { cancel(); <-done }, nil
}
