package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
		{Path: m("cmd/swarm"), Imports: []string{m("mailbox/sqlite")}},
		{Path: m("cmd/swarm"), Imports: []string{m("mailbox/postgres")}},
		{Path: m("swarm"), Imports: []string{m("mailbox/sqlite")}},
		{Path: m("worktree"), Imports: []string{m("mailbox")}},
		{Path: m("engine/exec"), Imports: []string{m("beads")}},
		{Path: m("engine/script"), Imports: []string{m("swarm")}},
		{Path: m("mailbox"), Imports: []string{m("cmd/swarm")}},
		{Path: m("lifecycle"), Imports: []string{m("config")}},
		{Path: m("mailbox/mailboxtest"), Imports: []string{"database/sql"}},
	}
	for _, p := range bad {
		if vs := Check([]Package{p}); len(vs) == 0 {
			t.Errorf("%s importing %v was not caught", strings.TrimPrefix(p.Path, Module+"/"), p.Imports)
		}
	}
	good := []Package{
		{Path: m("mailbox/sqlite"), Imports: []string{"database/sql", "modernc.org/sqlite", m("mailbox"), m("migrations")}},
		{Path: m("mailbox/open"), Imports: []string{m("mailbox/sqlite"), m("mailbox/postgres")}},
		{Path: m("engine/exec"), Imports: []string{m("engine"), m("proc")}},
		{Path: m("swarm"), Imports: []string{m("mailbox"), m("worktree"), m("engine")}},
		{Path: m("lifecycle"), Imports: []string{m("fsm"), m("message")}},
		{Path: m("cmd/swarm"), Imports: []string{m("swarm"), m("mailbox"), m("mailbox/open")}},
		{Path: m("cmd/swarmbench"), Imports: []string{m("mailbox/sqlite"), m("mailbox/postgres")}},
	}
	if vs := Check(good); len(vs) > 0 {
		t.Errorf("allowed imports flagged: %v", vs)
	}
}

// goList runs go list with args and returns the import paths it printed.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return strings.Fields(string(out))
}

// TestBinariesLinkNoTestHelpers checks what each binary really links.
func TestBinariesLinkNoTestHelpers(t *testing.T) {
	for _, b := range Binaries {
		deps := goList(t, "-deps", Module+"/"+b.Pkg)
		if len(deps) < 40 {
			t.Fatalf("%s links %d packages; the check would prove nothing", b.Pkg, len(deps))
		}
		for _, v := range CheckBinary(b, deps) {
			t.Error(v)
		}
	}
}

// TestCatchesBadDeps shows a binary's rule failing on a helper linked
// deep down, by a pattern too, and passing a bench exception.
func TestCatchesBadDeps(t *testing.T) {
	swarmBin, bench := Binaries[1], Binaries[2]
	for _, dep := range []string{Module + "/internal/fakeapi", Module + "/internal/pgtest", Module + "/internal/gittest",
		Module + "/mailbox/mailboxtest", "github.com/rogpeppe/go-internal/testscript", "github.com/chromedp/cdproto/cdp"} {
		deps := []string{"fmt", Module + "/swarm", dep}
		if vs := CheckBinary(swarmBin, deps); len(vs) != 1 || vs[0].Import != dep {
			t.Errorf("swarm linking %s: violations %v", dep, vs)
		}
	}
	if vs := CheckBinary(swarmBin, []string{"fmt", Module + "/mailbox", "github.com/chromedpx/other"}); len(vs) != 0 {
		t.Errorf("allowed deps flagged: %v", vs)
	}
	if vs := CheckBinary(bench, []string{Module + "/internal/pgtest"}); len(vs) != 0 {
		t.Errorf("the bench's cluster flagged: %v", vs)
	}
	if vs := CheckBinary(bench, []string{Module + "/mailbox/mailboxtest"}); len(vs) != 1 {
		t.Errorf("the bench linking the conformance suite: violations %v", vs)
	}
}

// TestCatchesAHeavyFront shows the front's rule failing on what swarmd
// may link (the store's interfaces, which compile JSON schemas; SQLite;
// genai) and passing the standard library and what it lists.
func TestCatchesAHeavyFront(t *testing.T) {
	front := Binaries[0]
	if front.Pkg != "cmd/swarm" || front.Only == nil {
		t.Fatalf("Binaries[0] is %s, not the front with its list", front.Pkg)
	}
	ok := []string{"fmt", "vendor/golang.org/x/net/dns/dnsmessage", "crypto/internal/entropy/v1.0.0", Module + "/control", "github.com/pelletier/go-toml/v2/unstable", Module + "/cmd/swarm"}
	if vs := CheckBinary(front, ok); len(vs) != 0 {
		t.Errorf("the front's own deps flagged: %v", vs)
	}
	for _, dep := range []string{Module + "/mailbox", "modernc.org/sqlite", "google.golang.org/genai", Module + "/swarm", "golang.org/x/sync/errgroup"} {
		vs := CheckBinary(front, append(slices.Clone(ok), dep))
		if len(vs) != 1 || vs[0].Import != dep || !strings.Contains(vs[0].Rule, "belong in swarmd") {
			t.Errorf("the front linking %s: violations %v", dep, vs)
		}
	}
}

// TestRulesNameRealPackages: every package a rule names is one of the
// module's, or linked by its tests.
func TestRulesNameRealPackages(t *testing.T) {
	known := goList(t, "-deps", "-test", Module+"/...")
	for _, v := range CheckNamed(Named(), known) {
		t.Error(v)
	}
}

// TestCatchesRenamedPackage shows a rule naming a package that is gone
// failing, a pattern included.
func TestCatchesRenamedPackage(t *testing.T) {
	known := []string{Module + "/fsm", "github.com/chromedp/chromedp"}
	vs := CheckNamed([]string{Module + "/fsm", Module + "/fsmx", "github.com/chromedp/...", "github.com/gone/..."}, known)
	if len(vs) != 2 || vs[0].Pkg != Module+"/fsmx" || vs[1].Pkg != "github.com/gone/..." {
		t.Errorf("violations: %v", vs)
	}
	if len(Named()) < 20 {
		t.Errorf("Named() = %v: the rules name more than that", Named())
	}
}

// TestIdentityRules reads the module's production source.
func TestIdentityRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var files []File
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(root, p)
		files = append(files, File{Path: filepath.ToSlash(r), Src: string(b)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("read %d files; the check would prove nothing", len(files))
	}
	for _, v := range CheckIdentity(files) {
		t.Error(v)
	}
	for _, v := range CheckDoors(files) {
		t.Error(v)
	}
}

// TestCatchesIdentityClaims shows both identity rules failing.
func TestCatchesIdentityClaims(t *testing.T) {
	vs := CheckIdentity([]File{
		{Path: "cmd/swarmd/cmd_x.go", Src: "func f(a *App) { who := a.Env.Getenv(\"SWARM_AGENT\") }\n"},
		{Path: "cmd/swarmd/cmd_y.go", Src: "c := identity.Session(agent, 1, nil)\n"},
		{Path: "cmd/swarmd/cmd_y_test.go", Src: "c := identity.Session(agent, 1, nil)\n"},
		{Path: "swarm/doors.go", Src: "c := identity.Session(agent, 1, nil)\n"},
		{Path: "engine/env.go", Src: `set := map[string]string{"SWARM_AGENT": s.Agent}` + "\n"},
	})
	if len(vs) != 2 || !strings.HasPrefix(vs[0].Pkg, "cmd/swarmd/cmd_x.go:1") || !strings.HasPrefix(vs[1].Pkg, "cmd/swarmd/cmd_y.go:1") {
		t.Errorf("violations: %v", vs)
	}
}

// TestCatchesUseCasesAroundTheVerbs: a door that calls a use case of
// package swarm (under any import name) is named with its file:line; the
// runtime's names, tests, and packages that are not doors pass.
func TestCatchesUseCasesAroundTheVerbs(t *testing.T) {
	const imp = "package main\n\nimport \"github.com/swarmhq/swarm/swarm\"\n\n"
	vs := CheckDoors([]File{
		{Path: "cmd/swarmd/cmd_x.go", Src: imp + "func f() {\n\tswarm.SignalItem(ctx, st, cfg, req)\n}\n"},
		{Path: "web/desk.go", Src: "package web\n\nimport sw \"github.com/swarmhq/swarm/swarm\"\n\nvar _ = sw.Decide\n"},
		{Path: "cmd/swarmd/cmd_up.go", Src: imp + "func f() { swarm.New(swarm.Options{}) }\n"},
		{Path: "cmd/swarmd/cmd_x_test.go", Src: imp + "func f() { swarm.SignalItem(ctx, st, cfg, req) }\n"},
		{Path: "verbs/workflows.go", Src: "package verbs\n\n" + `import "github.com/swarmhq/swarm/swarm"` + "\n\nfunc f() { swarm.SignalItem(ctx, st, cfg, req) }\n"},
	})
	if len(vs) != 2 || vs[0].Pkg != "cmd/swarmd/cmd_x.go:6" || vs[0].Import != "swarm.SignalItem" || vs[1].Pkg != "web/desk.go:5" || vs[1].Import != "swarm.Decide" {
		t.Errorf("violations: %v", vs)
	}
}
