package deptest

import (
	"slices"
	"strings"
)

// The import rules read one package's direct imports; what a binary
// finally links is their closure. As tailscale's tstest/deptest does, each
// binary names the packages it must never link, with why, and the test
// reads `go list -deps` of the binary: a test helper reached through three
// packages fails as surely as one imported by main.

// Binary is one of the module's binaries and what it must never link.
type Binary struct {
	Pkg string // its main package, relative to the module ("cmd/swarm")
	// BadDeps maps an import path to why the binary must not link it. A
	// path ending in "/..." names that package and every one below it.
	BadDeps map[string]string
	// Only, when set, is all the binary may link beyond the standard
	// library (paths, or patterns ending in "/..."), and Why says why.
	Only []string
	Why  string
}

// frontOnly is what the swarm front may link: the socket's client, the
// repository's layout, and a TOML reader for swarm.toml's database URL
// (to name the database a send would write). Every package added here
// runs its initialiser in every command an agent types.
var frontOnly = []string{
	Module + "/cmd/swarm",
	Module + "/internal/front",
	Module + "/control",
	Module + "/repo",
	Module + "/mailbox/dburl",
	Module + "/message",
	"github.com/pelletier/go-toml/v2/...",
	"golang.org/x/sys/unix",
}

// testHelpers are what only tests may link: every binary refuses them,
// but for the exceptions a binary names.
var testHelpers = map[string]string{
	Module + "/internal/fakeapi":                 "a fake model API, for the CLIs' journeys",
	Module + "/internal/pgtest":                  "a throw-away PostgreSQL cluster, for tests",
	Module + "/internal/gittest":                 "throw-away git repositories, for tests",
	Module + "/internal/deptest":                 "these rules, a test",
	Module + "/mailbox/mailboxtest":              "the stores' conformance suite, a test",
	Module + "/reliability":                      "the crash suite, a test",
	"github.com/rogpeppe/go-internal/testscript": "the CLI journeys' runner",
	"github.com/chromedp/...":                    "the web desk's browser journey",
}

// Binaries are the module's binaries with their rules.
var Binaries = []Binary{
	{Pkg: "cmd/swarm", BadDeps: testHelpers, Only: frontOnly,
		Why: "the front starts every command an agent or the operator types: the supervisor's, the engines' and the stores' dependencies belong in swarmd"},
	{Pkg: "cmd/swarmd", BadDeps: testHelpers},
	{Pkg: "cmd/swarmbench", BadDeps: without(testHelpers,
		// P8 measures the PostgreSQL store against a cluster of its own.
		Module+"/internal/pgtest")},
}

// without is deps less the named exceptions.
func without(deps map[string]string, except ...string) map[string]string {
	out := map[string]string{}
	for k, v := range deps {
		if !slices.Contains(except, k) {
			out[k] = v
		}
	}
	return out
}

// CheckBinary returns a violation for each package of deps (the binary's
// `go list -deps`) that b must not link.
func CheckBinary(b Binary, deps []string) []Violation {
	var out []Violation
	for _, d := range deps {
		for bad, why := range b.BadDeps {
			if matches(bad, d) {
				out = append(out, Violation{Pkg: Module + "/" + b.Pkg + " (the binary, through its deps)", Import: d, Rule: "the binary never links it (" + why + ")"})
			}
		}
		if b.Only != nil && !isStd(d) && !slices.ContainsFunc(b.Only, func(p string) bool { return matches(p, d) }) {
			out = append(out, Violation{Pkg: Module + "/" + b.Pkg + " (the binary, through its deps)", Import: d, Rule: "not in what the binary may link (" + b.Why + ")"})
		}
	}
	return out
}

// isStd reports whether pkg is in the standard library: no dot in its
// first element (the toolchain's vendored packages included).
func isStd(pkg string) bool {
	first, _, _ := strings.Cut(pkg, "/")
	return !strings.Contains(first, ".")
}

// matches reports whether pattern (a path, or a path ending in "/...")
// names pkg.
func matches(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// Named is every package the rules name: the leaves, the adapters, the
// stores' importers, the binaries and what they must not link. A rule that
// names a package since renamed or removed would pass forever, checking
// nothing; CheckNamed catches it.
func Named() []string {
	var out []string
	for _, r := range leaves {
		out = append(out, Module+"/"+r)
	}
	for _, r := range adapters {
		out = append(out, Module+"/"+r)
	}
	for r := range storeImporters {
		out = append(out, Module+"/"+r)
	}
	for _, b := range Binaries {
		out = append(out, Module+"/"+b.Pkg)
		for bad := range b.BadDeps {
			out = append(out, bad)
		}
		out = append(out, b.Only...)
	}
	for _, p := range sessionBuilders {
		out = append(out, Module+"/"+strings.TrimSuffix(p, "/"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CheckNamed returns a violation for each name in names that no package
// of known (the module's packages and everything its tests link) is.
func CheckNamed(names, known []string) []Violation {
	var out []Violation
	for _, n := range names {
		if !slices.ContainsFunc(known, func(k string) bool { return matches(n, k) }) {
			out = append(out, Violation{Pkg: n, Import: "-", Rule: "a rule names this package, which does not exist: update the rule lists in internal/deptest"})
		}
	}
	return out
}
