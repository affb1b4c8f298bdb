package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// The flag tests build one command with its runF seam, under a root built
// as the binary builds it, and run it through execute: the options the
// flags produced are checked without running the command, and a mistake in
// the command line must exit 2 before runF is reached.

// runFlags runs `swarm <args>` with the root holding only cmd and returns
// the exit code and stderr.
func runFlags(t *testing.T, newCmd func(*App) *cobra.Command, args ...string) (int, string) {
	t.Helper()
	var out, errb strings.Builder
	app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: downEnv{}, Cwd: t.TempDir(), inProcess: true}
	code := execute(context.Background(), app, newRoot(app, newCmd(app)), args)
	return code, errb.String()
}

// flagCase is one command line: the options it must give, or usage when
// it must exit 2 without running.
type flagCase[O any] struct {
	args  []string
	usage bool
	check func(t *testing.T, o *O)
}

func testFlags[O any](t *testing.T, build func(*App, func(*O) error) *cobra.Command, cases []flagCase[O]) {
	t.Helper()
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var got *O
			code, stderr := runFlags(t, func(app *App) *cobra.Command {
				return build(app, func(o *O) error { got = o; return nil })
			}, c.args...)
			if c.usage {
				if code != exitUsage || got != nil {
					t.Fatalf("exit %d, ran %v; want exit 2 without running; stderr:\n%s", code, got != nil, stderr)
				}
				if !strings.Contains(stderr, "--help' for usage") && !strings.Contains(stderr, "swarm: ") {
					t.Errorf("stderr does not say what went wrong:\n%s", stderr)
				}
				return
			}
			if code != exitOK || got == nil {
				t.Fatalf("exit %d, ran %v; want exit 0 with options; stderr:\n%s", code, got != nil, stderr)
			}
			c.check(t, got)
		})
	}
}

func TestSendFlags(t *testing.T) {
	testFlags(t, newSendCmd, []flagCase[SendOptions]{
		{args: []string{"send", "backend", "the endpoint is down", "--urgent", "--from", "lead", "--reply-to", "#12", "--kind", "task"},
			check: func(t *testing.T, o *SendOptions) {
				if o.To != "backend" || o.Body != "the endpoint is down" || !o.Urgent || o.From != "lead" ||
					o.ReplyTo != "#12" || !o.replyToSet || o.Kind != "task" || !o.kindSet || o.All {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"send", "--all", "standup"},
			check: func(t *testing.T, o *SendOptions) {
				if !o.All || o.Body != "standup" || o.To != "" || o.Kind != "message" || o.kindSet {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"send", "critic", "--type", "review_request", "--task", "T-42", "--payload", "@review.json",
			"--ack-timeout", "15m", "--context-ref", "a-1", "--context-ref", "b-2"},
			check: func(t *testing.T, o *SendOptions) {
				if o.To != "critic" || o.Type != "review_request" || o.Task != "T-42" || o.Payload != "@review.json" ||
					o.AckTimeout != 15*time.Minute || !slices.Equal(o.ContextRef, []string{"a-1", "b-2"}) || o.NoAck {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"send", "--type", "ping", "--no-ack"},
			check: func(t *testing.T, o *SendOptions) {
				if o.To != "" || o.Type != "ping" || !o.NoAck {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"send"}, usage: true},
		{args: []string{"send", "backend"}, usage: true},
		{args: []string{"send", "backend", "hi", "--ack-timeout", "soon"}, usage: true},
		{args: []string{"send", "backend", "hi", "--loud"}, usage: true},
	})
}

func TestLandFlags(t *testing.T) {
	testFlags(t, newLandCmd, []flagCase[LandOptions]{
		{args: []string{"land", "backend", "--wait"},
			check: func(t *testing.T, o *LandOptions) {
				if o.Agent != "backend" || !o.Wait || o.All || o.PruneRemote {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"land", "--all", "--prune-remote"},
			check: func(t *testing.T, o *LandOptions) {
				if !o.All || !o.PruneRemote || !o.Wait { // --prune-remote implies --wait
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"land", "--cancel", "12", "--note", "superseded"},
			check: func(t *testing.T, o *LandOptions) {
				if o.Cancel != 12 || o.Note != "superseded" || o.Wait {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"land", "--item", "T-3"},
			check: func(t *testing.T, o *LandOptions) {
				if o.Item != "T-3" || o.Agent != "" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"land", "backend", "--all"}, usage: true},
		{args: []string{"land", "--item", "T-3", "--cancel", "4"}, usage: true},
		{args: []string{"land", "--cancel", "4", "--prune-remote"}, usage: true},
		{args: []string{"land", "--cancel", "four"}, usage: true},
		{args: []string{"land", "a", "b"}, usage: true},
	})
}

func TestReserveFlags(t *testing.T) {
	testFlags(t, newReserveCmd, []flagCase[ReserveOptions]{
		{args: []string{"reserve", "api/**", "docs/setup.md", "--exclusive", "--ttl", "2h", "--reason", "migrating", "--agent", "backend"},
			check: func(t *testing.T, o *ReserveOptions) {
				if !slices.Equal(o.Globs, []string{"api/**", "docs/setup.md"}) || !o.Exclusive || o.TTL != 2*time.Hour ||
					o.Reason != "migrating" || o.Agent != "backend" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"reserve", "db/"},
			check: func(t *testing.T, o *ReserveOptions) {
				if !slices.Equal(o.Globs, []string{"db/"}) || o.Exclusive || o.TTL != 0 || o.Agent != "" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"reserve"}, usage: true},
		{args: []string{"reserve", "db/", "--ttl", "a while"}, usage: true},
	})
}

func TestWorkflowStartFlags(t *testing.T) {
	testFlags(t, newWorkflowCmd, []flagCase[WorkflowOptions]{
		{args: []string{"workflow", "start", "review", "--item", "T-42", "--title", "Add --dry-run",
			"--criterion", "flag documented", "--criterion", "tests pass", "--risk", "high", "--complex"},
			check: func(t *testing.T, o *WorkflowOptions) {
				if o.Action != "start" || o.Name != "review" || o.Item != "T-42" || o.Title != "Add --dry-run" ||
					!slices.Equal(o.Criteria, []string{"flag documented", "tests pass"}) || o.Risk != "high" || !o.Complex {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"workflow", "start", "qa", "--item", "F-1", "--title", "login page"},
			check: func(t *testing.T, o *WorkflowOptions) {
				if o.Action != "start" || o.Name != "qa" || o.Risk != "medium" || o.Complex || o.Criteria != nil {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"workflow", "start"}, usage: true},
		{args: []string{"workflow", "start", "a", "b"}, usage: true},
		{args: []string{"workflow", "start", "review", "--complex=maybe"}, usage: true},
		{args: []string{"workflow", "start", "review", "--next", "QA"}, usage: true}, // signal's flag
	})
}

func TestEscalationAckFlags(t *testing.T) {
	testFlags(t, newEscalationCmd, []flagCase[EscalationOptions]{
		{args: []string{"escalation", "ack", "#3", "--note", "looking at it"},
			check: func(t *testing.T, o *EscalationOptions) {
				if o.Action != "ack" || o.ID != 3 || o.Note != "looking at it" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"escalation", "ack", "3"},
			check: func(t *testing.T, o *EscalationOptions) {
				if o.Action != "ack" || o.ID != 3 || o.Note != "" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"escalation", "ack"}, usage: true},
		{args: []string{"escalation", "ack", "three"}, usage: true},
		{args: []string{"escalation", "ack", "0"}, usage: true},
		{args: []string{"escalation", "show", "3", "--note", "x"}, usage: true},
	})
}

func TestDownFlags(t *testing.T) {
	testFlags(t, newDownCmd, []flagCase[DownOptions]{
		{args: []string{"down", "--merge", "--delete-ignored", "--yes"},
			check: func(t *testing.T, o *DownOptions) {
				if !o.Merge || !o.DeleteIgnored || !o.Yes || o.Squash || o.Discard || o.Keep {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"down"},
			check: func(t *testing.T, o *DownOptions) {
				if o.Merge || o.Squash || o.Discard {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"down", "--merge", "--discard"}, usage: true},
		{args: []string{"down", "now"}, usage: true},
	})
}

func TestReportFlags(t *testing.T) {
	testFlags(t, newReportCmd, []flagCase[ReportOptions]{
		{args: []string{"report", "blocked", "demo-6fx", "needs the schema"},
			check: func(t *testing.T, o *ReportOptions) {
				if o.Kind != "blocked" || o.Task != "demo-6fx" || o.Message != "needs the schema" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"report", "session", "API done"},
			check: func(t *testing.T, o *ReportOptions) {
				if o.Kind != "session" || o.Task != "" || o.Message != "API done" {
					t.Errorf("options = %+v", *o)
				}
			}},
		{args: []string{"report"}, usage: true},
		{args: []string{"report", "done", "T-1", "x"}, usage: true},
		{args: []string{"report", "progress", "T-1"}, usage: true},
		{args: []string{"report", "session", "a", "b"}, usage: true},
	})
}

// TestCommandsListed: every command the root lists is built once, named
// once, and the seams are nil there (they run the real command).
func TestCommandsListed(t *testing.T) {
	app := &App{Env: downEnv{}}
	seen := map[string]bool{}
	for _, c := range commands(app) {
		if seen[c.Name()] {
			t.Errorf("command %q listed twice", c.Name())
		}
		seen[c.Name()] = true
	}
	for _, name := range []string{"send", "land", "reserve", "workflow", "escalation", "pause", "resume", "up", "version"} {
		if !seen[name] {
			t.Errorf("command %q missing from the root's list", name)
		}
	}
}
