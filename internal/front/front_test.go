package front

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/mailbox/dburl"
	"github.com/swarmhq/swarm/repo"
)

type env map[string]string

func (e env) Getenv(k string) string { return e[k] }

// TestSessionNeverRunsHere: in a session, a command goes to its door or
// nowhere. An operator command is refused before the door is asked, and a
// closed door fails the command: it never falls back to running in the
// session's own process, where it could open the database.
func TestSessionNeverRunsHere(t *testing.T) {
	door := filepath.Join(t.TempDir(), "gone.sock")
	for _, tc := range []struct {
		args    []string
		handled bool
		stderr  string
	}{
		{[]string{"send", "operator", "hi"}, true, "this session's door (" + door + ") is closed"},
		{[]string{"--json", "inbox", "backend"}, true, "is closed"},
		{[]string{"up"}, true, "'swarm up' is the operator's, and this runs inside an agent's session"},
		{[]string{"--dir", "/elsewhere", "down", "--merge"}, true, "'swarm down' is the operator's"},
		{[]string{"version"}, false, ""},
		{[]string{"mcp"}, false, ""},
		{[]string{"send", "--help"}, false, ""},
	} {
		var stdout, stderr bytes.Buffer
		c := &Call{Args: tc.args, Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Env: env{"SWARM_DOOR": door}, Cwd: t.TempDir()}
		code, handled := Answer(context.Background(), c)
		if handled != tc.handled || tc.handled && (code != 1 || !strings.Contains(stderr.String(), tc.stderr)) || !tc.handled && stderr.Len() > 0 {
			t.Errorf("%v: code %d, handled %v, stderr %q", tc.args, code, handled, stderr.String())
		}
	}
}

// TestOperatorSendWithoutASupervisor: no supervisor, nothing answered and
// nothing read but the message, which is kept for the whole program.
func TestOperatorSendWithoutASupervisor(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{".git", ".swarm"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "swarm.toml"), []byte("[[agent]]\nname = \"backend\"\n"), 0o644)
	os.WriteFile(filepath.Join(root, ".swarm", "swarm.db"), nil, 0o644)
	var stdout, stderr bytes.Buffer
	c := &Call{Args: []string{"send", "backend", "-"}, Stdin: strings.NewReader("the body"), Stdout: &stdout, Stderr: &stderr, Env: env{}, Cwd: root}
	if code, handled := Answer(context.Background(), c); handled || code != 0 || stdout.Len()+stderr.Len() > 0 {
		t.Fatalf("answered with no supervisor: %d %v %q %q", code, handled, stdout.String(), stderr.String())
	}
	b := new(bytes.Buffer)
	b.ReadFrom(c.Stdin)
	if !c.StdinRead || b.String() != "the body" {
		t.Fatalf("the message read from stdin was not kept: %v %q", c.StdinRead, b.String())
	}
	// Not a send: not even looked at.
	c = &Call{Args: []string{"status"}, Stdin: strings.NewReader("x"), Env: env{}, Cwd: root}
	if _, handled := Answer(context.Background(), c); handled || c.StdinRead {
		t.Fatalf("status was answered or read stdin")
	}
}

func TestCommandName(t *testing.T) {
	for args, want := range map[string]string{
		"send a b":             "send",
		"--json send a":        "send",
		"--dir /x -v down":     "down",
		"--dir=/x up":          "up",
		"-vv --json":           "",
		"version":              "version",
		"--dir /x --json mail": "mail",
	} {
		if got := CommandName(strings.Fields(args)); got != want {
			t.Errorf("CommandName(%q) = %q, want %q", args, got, want)
		}
	}
}

// TestCheckBeside: swarmd needs the front beside it; a binary of another
// name (a test binary, the front itself) is not checked.
func TestCheckBeside(t *testing.T) {
	dir := t.TempDir()
	swarmd := filepath.Join(dir, Program)
	os.WriteFile(swarmd, []byte("#!/bin/sh\n"), 0o755)
	if err := CheckBeside(swarmd); err == nil || !strings.Contains(err.Error(), "no swarm beside swarmd in "+dir) {
		t.Fatalf("swarmd alone: %v", err)
	}
	if Beside(swarmd) != swarmd {
		t.Fatalf("Beside with no front: %s", Beside(swarmd))
	}
	os.WriteFile(filepath.Join(dir, Name), []byte("not executable"), 0o644)
	if err := CheckBeside(swarmd); err == nil {
		t.Fatal("a front that cannot run passed")
	}
	os.Chmod(filepath.Join(dir, Name), 0o755)
	if err := CheckBeside(swarmd); err != nil {
		t.Fatal(err)
	}
	if Beside(swarmd) != filepath.Join(dir, Name) {
		t.Fatalf("Beside: %s", Beside(swarmd))
	}
	if err := CheckBeside(filepath.Join(t.TempDir(), "swarmd.test")); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorSendNamesItsDatabase: the send tells the supervisor which
// database it would have written (SWARM_DB_URL, else swarm.toml's, else
// the file), passwords redacted; swarm.toml that is not TOML is left to
// the whole program, with no request made.
func TestOperatorSendNamesItsDatabase(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{".git", ".swarm"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := repo.Find("", root, env{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(l.DB, nil, 0o644)
	srv, err := control.Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	reqs := make(chan control.RunRequest, 8)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, func(_ context.Context, req control.Request, _ func(any) error) control.Response {
			reqs <- *req.Run
			data, _ := json.Marshal(control.RunResult{Stdout: "sent\n"})
			return control.Response{OK: true, Data: data}
		})
	}()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	for _, tc := range []struct {
		toml, envURL, want string
	}{
		{"[[agent]]\nname = \"backend\"\n", "", l.DB},
		{"[mailbox]\nurl = \"postgres://db.example/swarm\"\n", "", "postgres://db.example/swarm"},
		{"[mailbox]\nurl = \"postgres://db.example/swarm\"\n", "postgres://u:secret@other/x", "postgres://u:xxxxx@other/x"},
		{"[[agent]] not toml", "", ""},
	} {
		os.WriteFile(l.Config, []byte(tc.toml), 0o644)
		var stdout bytes.Buffer
		c := &Call{Args: []string{"send", "backend", "hi"}, Stdout: &stdout, Stderr: io.Discard, Env: env{dburl.EnvURL: tc.envURL}, Cwd: root}
		code, handled := Answer(ctx, c)
		if tc.want == "" {
			if handled {
				t.Errorf("%q: answered", tc.toml)
			}
			continue
		}
		if !handled || code != 0 || stdout.String() != "sent\n" {
			t.Errorf("%q: %d %v %q", tc.toml, code, handled, stdout.String())
			continue
		}
		if got := <-reqs; got.Target != tc.want || !slices.Equal(got.Args, c.Args) || got.Dir != root {
			t.Errorf("%q with %q: request %+v, want target %s", tc.toml, tc.envURL, got, tc.want)
		}
	}
	if len(reqs) > 0 {
		t.Errorf("a request for swarm.toml that does not read: %+v", <-reqs)
	}
}

// TestBesideFront: swarmd is found beside the front, or beside the file a
// link to the front names (a link in ~/bin to an unpacked release).
func TestBesideFront(t *testing.T) {
	release, bin := t.TempDir(), t.TempDir()
	for _, n := range []string{Name, Program} {
		os.WriteFile(filepath.Join(release, n), []byte("#!/bin/sh\n"), 0o755)
	}
	link := filepath.Join(bin, Name)
	if err := os.Symlink(filepath.Join(release, Name), link); err != nil {
		t.Fatal(err)
	}
	if p, ok := besideFront(link); !ok || p != filepath.Join(release, Program) {
		t.Fatalf("through the link: %q %v", p, ok)
	}
	if p, ok := besideFront(filepath.Join(release, Name)); !ok || p != filepath.Join(release, Program) {
		t.Fatalf("beside: %q %v", p, ok)
	}
	if _, ok := besideFront(filepath.Join(t.TempDir(), Name)); ok {
		t.Fatal("found a swarmd where there is none")
	}
}
