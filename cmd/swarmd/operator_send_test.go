package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/swarmhq/swarm/control"
	"github.com/swarmhq/swarm/internal/gittest"
	"github.com/swarmhq/swarm/repo"
)

// TestOperatorSendNeverOpensTheDatabase: the operator's `swarm send`, with
// a supervisor answering on .swarm/control.sock, is run by the supervisor
// (op run, as the operator: no identity in the request), and its process
// neither opens nor migrates .swarm/swarm.db. The stand-in supervisor's
// database is a file that is no database, so a client that opened the
// store would fail, or leave a journal or WAL beside it.
func TestOperatorSendNeverOpensTheDatabase(t *testing.T) {
	root := gittest.Repo(t, map[string]string{"swarm.toml": "[[agent]]\nname = \"alpha\"\nrole = \"You are alpha.\"\n"})
	if err := os.MkdirAll(filepath.Join(root, ".swarm"), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := repo.Find("", root, downEnv{})
	if err != nil {
		t.Fatal(err)
	}
	const notADatabase = "not a database: a client that opens it fails\n"
	gittest.WriteFile(t, l.DB, notADatabase)
	srv, err := control.Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		runs []control.RunRequest
	)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, func(_ context.Context, req control.Request, _ func(any) error) control.Response {
			if req.Op != control.OpRun || req.Run == nil {
				return control.Response{Error: "unexpected op " + req.Op}
			}
			mu.Lock()
			runs = append(runs, *req.Run)
			mu.Unlock()
			data, _ := json.Marshal(control.RunResult{Stdout: "sent urgent #7 to alpha (Running): interrupted its session\n", Stderr: "a warning\n", Code: 0})
			return control.Response{OK: true, Data: data}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	var out, errb bytes.Buffer
	defer func() {
		data, err := os.ReadFile(l.DB)
		if err != nil || string(data) != notADatabase {
			t.Errorf("the client changed %s (%v): a send to a running supervisor must not touch the database", l.DB, err)
		}
		for _, side := range []string{"-wal", "-shm", "-journal"} {
			if _, err := os.Stat(l.DB + side); err == nil {
				t.Errorf("the client opened %s: %s%s exists", l.DB, l.DB, side)
			}
		}
	}()
	app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: downEnv{}, Cwd: root}
	code := run(context.Background(), app, []string{"send", "alpha", "stop: wrong table", "--urgent"})
	if code != 0 || out.String() != "sent urgent #7 to alpha (Running): interrupted its session\n" || errb.String() != "a warning\n" {
		t.Errorf("exit %d, stdout %q, stderr %q: not the supervisor's answer relayed", code, out.String(), errb.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 1 {
		t.Fatalf("the supervisor ran %d commands, want the one send", len(runs))
	}
	r := runs[0]
	if !slices.Equal(r.Args, []string{"send", "alpha", "stop: wrong table", "--urgent"}) || r.Dir != root || r.Target != l.DB || len(r.Env) != 0 {
		t.Errorf("run request %+v: want the args, the operator's directory, the database %s and no identity", r, l.DB)
	}
}

// TestOperatorSendRunsHereWhenRefused: a supervisor that refuses the run
// (here at its connection cap) did nothing, so the command runs in its own
// process, as with no supervisor: it opens the database (this one is
// damaged, which it reports), and never says the supervisor took the mail.
func TestOperatorSendRunsHereWhenRefused(t *testing.T) {
	root := gittest.Repo(t, map[string]string{"swarm.toml": "[[agent]]\nname = \"alpha\"\nrole = \"You are alpha.\"\n"})
	l, err := repo.Find("", root, downEnv{})
	if err != nil {
		t.Fatal(err)
	}
	gittest.WriteFile(t, l.DB, "not a database\n")
	srv, err := control.Listen(l)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, func(context.Context, control.Request, func(any) error) control.Response {
			return control.Response{Error: "the supervisor is answering 256 connections (its limit); close a watching swarm command and retry"}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	var out, errb bytes.Buffer
	app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: downEnv{}, Cwd: root}
	code := run(context.Background(), app, []string{"send", "alpha", "hello"})
	if code != exitError || !strings.Contains(errb.String(), "file is not a database") || strings.Contains(errb.String(), "took the message") {
		t.Errorf("exit %d, stderr %q: want the send run here, on the damaged database", code, errb.String())
	}
}
