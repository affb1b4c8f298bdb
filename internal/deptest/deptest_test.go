package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestHouseRules checks the real import graph.
func TestHouseRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, Package{Path: p.ImportPath, Imports: p.Imports})
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; the check would prove nothing", len(pkgs))
	}
	for _, v := range Check(pkgs) {
		t.Error(v)
	}
}

// TestCatchesForbiddenImports shows each rule failing on an import it
// forbids, and passing the allowed ones.
func TestCatchesForbiddenImports(t *testing.T) {
	m := func(r string) string { return Module + "/" + r }
	bad := []Package{
		{Path: m("swarm"), Imports: []string{"database/sql"}},
		{Path: m("cmd/swarm"), Imports: []string{"modernc.org/sqlite"}},
		{Path: m("worktree"), Imports: []string{m("mailbox")}},
		{Path: m("engine/exec"), Imports: []string{m("beads")}},
		{Path: m("engine/script"), Imports: []string{m("swarm")}},
		{Path: m("mailbox"), Imports: []string{m("cmd/swarm")}},
		{Path: m("lifecycle"), Imports: []string{m("config")}},
		{Path: m("mailbox/mailboxtest"), Imports: []string{"database/sql"}},
	}
	vs := Check(bad)
	got := map[string]bool{}
	for _, v := range vs {
		got[strings.TrimPrefix(v.Pkg, Module+"/")] = true
	}
	for _, p := range bad {
		if r := strings.TrimPrefix(p.Path, Module+"/"); !got[r] {
			t.Errorf("%s importing %v was not caught", r, p.Imports)
		}
	}
	good := []Package{
		{Path: m("mailbox/sqlite"), Imports: []string{"database/sql", "modernc.org/sqlite", m("mailbox"), m("migrations")}},
		{Path: m("engine/exec"), Imports: []string{m("engine"), m("proc")}},
		{Path: m("swarm"), Imports: []string{m("mailbox"), m("worktree"), m("engine")}},
		{Path: m("lifecycle"), Imports: []string{m("fsm"), m("message")}},
		{Path: m("cmd/swarm"), Imports: []string{m("swarm"), m("mailbox/sqlite")}},
	}
	if vs := Check(good); len(vs) > 0 {
		t.Errorf("allowed imports flagged: %v", vs)
	}
}
