package beads

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixtures holds real bd 1.0.3 output; testdata/fixtures/README.txt says how
// each file was captured.
const fixtures = "testdata/fixtures"

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ids(issues []Issue) []string {
	out := make([]string, len(issues))
	for i, is := range issues {
		out[i] = is.ID
	}
	return out
}

// parseCases gives every captured stdout file its expected parse: the ids
// of an issue array, or a bad-output error. TestParseReadyEveryFixture
// fails when a fixture is added without a case here.
var parseCases = map[string][]string{
	"ready.json":              {"demo-6fx", "demo-9z2", "demo-9z2.1"},
	"ready_envelope.json":     {"demo-6fx", "demo-9z2", "demo-9z2.1"},
	"ready_after_claim.json":  {"demo-9z2", "demo-9z2.1", "demo-8bh"},
	"empty_ready.json":        {},
	"list.json":               {"demo-6fx", "demo-9z2", "demo-9z2.1", "demo-2yt", "demo-a0a"},
	"list_all.json":           {"demo-6fx", "demo-9z2", "demo-9z2.1", "demo-2yt", "demo-a0a", "demo-0iu"},
	"list_in_progress.json":   {"demo-a0a"},
	"blocked.json":            {"demo-2yt"},
	"show.json":               {"demo-2yt"},
	"show_epic.json":          {"demo-9z2"},
	"update_claim.json":       {"demo-6fx"},
	"update_in_progress.json": {"demo-a0a"},
	"close.json":              {"demo-0iu"},
	// Not issue arrays: errors.
	"nodb_ready.json":          nil, // empty stdout: bd found no database
	"nodb_git_ready.json":      nil,
	"nodb_ready_envelope.json": nil,
	"nodb_ready_human.txt":     nil,
	"show_missing.json":        nil, // {"error": …}
	"create.json":              nil, // a single object
	"dep_add.json":             nil,
	"version_json.json":        nil,
	"ready_human.txt":          nil,
	"ready_plain.txt":          nil,
	"empty_ready_human.txt":    nil,
	"list_human.txt":           nil,
	"blocked_human.txt":        nil,
	"show_human.txt":           nil,
	"init.txt":                 nil,
	"version.txt":              nil,
}

func TestParseReadyEveryFixture(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(fixtures, "*"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		name := filepath.Base(f)
		switch filepath.Ext(name) {
		case ".json", ".txt":
		default:
			continue
		}
		if name == "README.txt" || name == "timing.txt" {
			continue
		}
		want, ok := parseCases[name]
		if !ok {
			t.Errorf("fixture %s has no parse case", name)
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			got, err := ParseReady(fixture(t, name))
			if want == nil {
				if !errors.Is(err, ErrBadOutput) {
					t.Fatalf("err = %v, want ErrBadOutput (issues %v)", err, ids(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || !slices.Equal(ids(got), want) {
				t.Fatalf("ids = %#v, want %#v", ids(got), want)
			}
		})
	}
	if seen != len(parseCases) {
		t.Errorf("checked %d fixtures, have %d cases: a fixture is missing", seen, len(parseCases))
	}
}

func TestParseReadyFields(t *testing.T) {
	for _, name := range []string{"ready.json", "ready_envelope.json"} {
		issues, err := ParseReady(fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		bug, epic, feat := issues[0], issues[1], issues[2]
		if bug.Title != "Crash when config file is empty" || bug.Status != "open" || bug.Priority != 0 ||
			bug.IssueType != "bug" || !slices.Equal(bug.Labels, []string{"backend"}) || bug.IsEpic() {
			t.Errorf("%s: bug = %+v", name, bug)
		}
		if !epic.IsEpic() || epic.Priority != 1 {
			t.Errorf("%s: epic = %+v", name, epic)
		}
		if feat.Parent != "demo-9z2" || feat.DependentCount != 1 || feat.IssueType != "feature" {
			t.Errorf("%s: feature = %+v", name, feat)
		}
	}
}

func TestParseReadyRejects(t *testing.T) {
	for _, in := range []string{
		"", "  \n", "null", "{}", `{"schema_version":1}`, `{"schema_version":1,"data":{}}`,
		`[{"title":"no id"}]`, `[{"id":"a-1","priority":"high"}]`, `[{"id":"a-1"}] trailing`,
		"Error: something", `{"error":"boom","schema_version":1}`,
	} {
		if _, err := ParseReady([]byte(in)); !errors.Is(err, ErrBadOutput) {
			t.Errorf("ParseReady(%q) err = %v, want ErrBadOutput", in, err)
		}
	}
	// Unknown fields, present and future, are ignored.
	got, err := ParseReady([]byte(`{"schema_version":2,"data":[{"id":"a-1","new_field":{"x":[1]},"priority":3}],"extra":true}`))
	if err != nil || len(got) != 1 || got[0].ID != "a-1" || got[0].Priority != 3 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// fakeBD writes an executable shell script and returns its path.
func fakeBD(t testing.TB, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "bd")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// replay is a fake bd that records its arguments and environment, then
// prints a captured fixture's stdout and stderr and exits with its code.
func replay(t *testing.T, name string) (c *Client, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "record")
	abs, err := filepath.Abs(fixtures)
	if err != nil {
		t.Fatal(err)
	}
	stdout := filepath.Join(abs, name)
	base := strings.TrimSuffix(stdout, filepath.Ext(stdout))
	code := strings.TrimSpace(string(fixture(t, strings.TrimSuffix(name, filepath.Ext(name))+".exit")))
	script := `printf '%s\n' "$*" "BD_ACTOR=$BD_ACTOR" "BEADS_ACTOR=$BEADS_ACTOR" "PWD=$PWD" > '` + record + `'
cat '` + stdout + `'
[ -f '` + base + `.stderr' ] && cat '` + base + `.stderr' >&2
exit ` + code
	bin := fakeBD(t, dir, script)
	work := t.TempDir()
	return &Client{Dir: work, Actor: "backend", Bin: bin, Env: []string{"PATH=" + os.Getenv("PATH"), "BEADS_ACTOR=someone", "BD_ACTOR=old"}}, record
}

func recorded(t *testing.T, record string) []string {
	t.Helper()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestClientReadyReplaysFixture(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"ready.json", "ready_envelope.json"} {
		c, record := replay(t, name)
		issues, err := c.Ready(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(issues), parseCases["ready.json"]) {
			t.Fatalf("%s: ids = %v", name, ids(issues))
		}
		rec := recorded(t, record)
		wantPWD := "PWD=" + c.Dir
		if !slices.Equal(rec, []string{"ready --json", "BD_ACTOR=backend", "BEADS_ACTOR=", wantPWD}) {
			t.Fatalf("bd saw %q", rec)
		}
	}
	c, _ := replay(t, "empty_ready.json")
	issues, err := c.Ready(ctx)
	if err != nil || issues == nil || len(issues) != 0 {
		t.Fatalf("empty: %v, %v", issues, err)
	}
}

// Without a database bd exits 1, prints nothing on stdout and explains on
// stderr, even with --json.
func TestClientNoDatabase(t *testing.T) {
	for _, name := range []string{"nodb_ready.json", "nodb_git_ready.json", "nodb_ready_envelope.json"} {
		c, _ := replay(t, name)
		_, err := c.Ready(context.Background())
		var be *Error
		if !errors.As(err, &be) || !errors.Is(err, ErrNoDatabase) || be.ExitCode != 1 {
			t.Fatalf("%s: err = %#v", name, err)
		}
		want := "bd ready --json: exit status 1: Error: no beads database found Hint: run 'bd where'"
		if !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("%s: err = %q, want prefix %q", name, err, want)
		}
	}
}

func TestClientRawCalls(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		fixture string
		call    func(*Client) (json.RawMessage, error)
		args    string
		want    string // in the result
	}{
		{"update_claim.json", func(c *Client) (json.RawMessage, error) { return c.Claim(ctx, "demo-6fx") }, "update demo-6fx --claim --json", `"assignee": "Demo User"`},
		{"close.json", func(c *Client) (json.RawMessage, error) { return c.Close(ctx, "demo-0iu", "done") }, "close demo-0iu --reason=done --json", `"close_reason": "done"`},
		{"show.json", func(c *Client) (json.RawMessage, error) { return c.Show(ctx, "demo-2yt") }, "show demo-2yt --json", `"dependency_type": "blocks"`},
		{"show_epic.json", func(c *Client) (json.RawMessage, error) { return c.Show(ctx, "demo-9z2") }, "show demo-9z2 --json", `"epic_total_children"`},
	}
	for _, tt := range tests {
		c, record := replay(t, tt.fixture)
		raw, err := tt.call(c)
		if err != nil {
			t.Fatalf("%s: %v", tt.fixture, err)
		}
		if !json.Valid(raw) || !strings.Contains(string(raw), tt.want) {
			t.Fatalf("%s: raw = %s", tt.fixture, raw)
		}
		if rec := recorded(t, record); rec[0] != tt.args || rec[1] != "BD_ACTOR=backend" {
			t.Fatalf("%s: bd saw %q, want %q", tt.fixture, rec, tt.args)
		}
	}
}

func TestClientShowMissing(t *testing.T) {
	c, _ := replay(t, "show_missing.json")
	_, err := c.Show(context.Background(), "demo-zzz")
	var be *Error
	if !errors.As(err, &be) || be.ExitCode != 1 || be.Stderr != `Error fetching demo-zzz: no issue found matching "demo-zzz"` {
		t.Fatalf("err = %#v", err)
	}
}

// A claim lost to another actor: exit 1 and plain text on stderr, even with
// --json. The text reaches the caller.
func TestClientLostClaim(t *testing.T) {
	c := &Client{Dir: t.TempDir(), Actor: "frontend", Bin: fakeBD(t, t.TempDir(), `echo "Error: demo-6fx is already claimed by backend" >&2; exit 1`)}
	_, err := c.Claim(context.Background(), "demo-6fx")
	if err == nil || !strings.Contains(err.Error(), "already claimed by backend") {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, ErrNoDatabase) || errors.Is(err, ErrBadOutput) {
		t.Fatalf("err = %v matches the wrong sentinel", err)
	}
}

func TestClientErrorFromJSONOnStdout(t *testing.T) {
	c := &Client{Dir: t.TempDir(), Bin: fakeBD(t, t.TempDir(), `echo '{"error":"database is locked","schema_version":1}'; exit 1`)}
	_, err := c.Show(context.Background(), "demo-1")
	if err == nil || !strings.Contains(err.Error(), "exit status 1: database is locked") {
		t.Fatalf("err = %v", err)
	}
}

func TestClientGarbage(t *testing.T) {
	c := &Client{Dir: t.TempDir(), Bin: fakeBD(t, t.TempDir(), `echo 'Segmentation fault, sort of'; echo 'warning: x' >&2`)}
	_, err := c.Ready(context.Background())
	var be *Error
	if !errors.As(err, &be) || !errors.Is(err, ErrBadOutput) || be.Command != "bd ready --json" {
		t.Fatalf("err = %#v", err)
	}
	if _, err := c.Claim(context.Background(), "demo-1"); !errors.Is(err, ErrBadOutput) {
		t.Fatalf("claim err = %v", err)
	}
}

func TestClientRejectsBadIDs(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "ran")
	c := &Client{Dir: dir, Bin: fakeBD(t, t.TempDir(), "touch '"+record+"'; echo '[]'")}
	ctx := context.Background()
	for _, id := range []string{"", "-rf", "--all", "a b", "a\nb"} {
		if _, err := c.Claim(ctx, id); err == nil {
			t.Errorf("Claim(%q) ran", id)
		}
		if _, err := c.Close(ctx, id, "x"); err == nil {
			t.Errorf("Close(%q) ran", id)
		}
		if _, err := c.Show(ctx, id); err == nil {
			t.Errorf("Show(%q) ran", id)
		}
	}
	if _, err := os.Stat(record); err == nil {
		t.Fatal("bd ran for a bad id")
	}
}

// Without bd on PATH there are no tasks: a distinguishable sentinel.
func TestNotInstalled(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	c := &Client{Dir: t.TempDir(), Actor: "backend"}
	if c.Installed() {
		t.Fatal("Installed with an empty PATH")
	}
	if _, err := c.Ready(context.Background()); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Ready err = %v", err)
	}
	if _, err := c.Claim(context.Background(), "demo-1"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Claim err = %v", err)
	}
	// The same client finds bd once it is on PATH.
	fakeBD(t, empty, "echo '[]'")
	if !c.Installed() {
		t.Fatal("not Installed with bd on PATH")
	}
	if issues, err := c.Ready(context.Background()); err != nil || len(issues) != 0 {
		t.Fatalf("Ready = %v, %v", issues, err)
	}
}

// A bd that hangs (here a shell whose child sleeps, holding stdout) is
// killed with its whole group when the timeout passes.
func TestClientTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "finished")
	c := &Client{Dir: dir, Timeout: 50 * time.Millisecond, Bin: fakeBD(t, t.TempDir(), "sleep 60 & wait; touch '"+marker+"'")}
	start := time.Now()
	_, err := c.Ready(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Ready took %s after a 50ms timeout", el)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the script ran to completion")
	}
}

func TestEnvReplacesActors(t *testing.T) {
	c := &Client{Actor: "backend", Env: []string{"A=1", "BD_ACTOR=x", "BEADS_ACTOR=y", "B=2"}}
	if got := c.env(); !slices.Equal(got, []string{"A=1", "B=2", "BD_ACTOR=backend"}) {
		t.Fatalf("env = %q", got)
	}
	// Without an actor, the user's own settings stand.
	c.Actor = ""
	if got := c.env(); !slices.Equal(got, c.Env) {
		t.Fatalf("env = %q", got)
	}
}
