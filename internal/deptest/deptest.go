// Package deptest enforces the house rules of DESIGN §2 on the import
// graph, so a forbidden dependency fails the build's tests instead of
// waiting for a reviewer:
//   - nothing below cmd imports cmd;
//   - the adapters (mailbox, worktree, beads, engine) do not import each
//     other: the supervisor wires them together through small interfaces;
//   - only the store implementations (mailbox/<backend>, mailbox/sqlstore
//     among them) import database/sql or a SQL driver;
//   - nothing outside mailbox/ imports a backend: commands open stores
//     through mailbox/open (the bench's raw baselines excepted);
//   - engines do not import the supervisor;
//   - the typed domain leaves (escalation, fsm, identity, lifecycle,
//     message, mode, merge, workflow, migrations) and internal/text, the
//     string helpers, import nothing of swarm's but each other;
//   - the caller is never read from the environment, and only the
//     supervisor builds a session's caller (identity.go, on the source);
//   - start-up stays lean: the built binary's package initialisers keep to
//     an allocation budget (startup.go, on GODEBUG=inittrace=1);
//   - each binary never links test helpers (binaries.go, on go list -deps),
//     and every package a rule names exists, so a rename cannot switch a
//     rule off.
//
// Rules read the production imports of each package (tests may reach
// further: a conformance suite opens a real store).
package deptest

import (
	"fmt"
	"slices"
	"strings"
)

// Module is swarm's module path.
const Module = "github.com/swarmhq/swarm"

// Package is one package of the module with its direct production imports.
type Package struct {
	Path    string
	Imports []string
}

// Violation is one forbidden import.
type Violation struct {
	Pkg, Import, Rule string
}

func (v Violation) String() string { return fmt.Sprintf("%s imports %s: %s", v.Pkg, v.Import, v.Rule) }

// rel strips the module prefix: "mailbox/sqlite", "" for the root.
func rel(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, Module+"/")
	return r, ok
}

// family is the adapter a package belongs to, "" when none.
func family(r string) string {
	for _, f := range adapters {
		if r == f || strings.HasPrefix(r, f+"/") {
			return f
		}
	}
	return ""
}

// isStore reports whether r is a store implementation: mailbox/<backend>,
// but not the interfaces, the conformance suite or dburl (which names a
// database and opens nothing).
func isStore(r string) bool {
	rest, ok := strings.CutPrefix(r, "mailbox/")
	return ok && !strings.Contains(rest, "/") && rest != "mailboxtest" && rest != "dburl"
}

var adapters = []string{"mailbox", "worktree", "beads", "engine"}

// storeImporters may import a backend from outside mailbox/, with why.
var storeImporters = map[string]string{
	"cmd/swarmbench": "P1, P7 and P8 measure each store against its raw SQL baseline (OpenRaw)",
}

// isBackend reports whether r is one backend (or code only backends
// share), which the rest of the house reaches through mailbox/open.
func isBackend(r string) bool { return isStore(r) && r != "mailbox/open" }

var leaves = []string{"escalation", "fsm", "identity", "internal/text", "lifecycle", "merge", "message", "mode", "migrations", "team", "workflow"}

var sqlImports = []string{`database/sql`, `modernc.org/sqlite`, `github.com/jackc/pgx/v5`}

// Check returns every violation in pkgs.
func Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		pr, ok := rel(p.Path)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			add := func(rule string) { out = append(out, Violation{Pkg: p.Path, Import: imp, Rule: rule}) }
			for _, s := range sqlImports {
				if (imp == s || strings.HasPrefix(imp, s+"/")) && !isStore(pr) {
					add("only the store implementations (mailbox/<backend>) write SQL; use the mailbox interfaces")
				}
			}
			ir, internal := rel(imp)
			if !internal {
				continue
			}
			if (ir == "cmd" || strings.HasPrefix(ir, "cmd/")) && !strings.HasPrefix(pr, "cmd/") {
				add("packages below cmd never import cmd")
			}
			if pf, ifam := family(pr), family(ir); pf != "" && ifam != "" && pf != ifam {
				add("adapters do not import each other; the supervisor wires them through interfaces")
			}
			if isBackend(ir) && !strings.HasPrefix(pr, "mailbox/") && storeImporters[pr] == "" {
				add("only mailbox/open opens a store; use mailbox.Store and mailbox's errors (mailbox.ErrDamaged), not a backend")
			}
			if family(pr) == "engine" && ir == "swarm" {
				add("engines do not import the supervisor")
			}
			if slices.Contains(leaves, pr) && !slices.Contains(leaves, ir) {
				add("the domain leaves import only each other")
			}
		}
	}
	return out
}
