package verbs

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's verb table")

// exported lists this package's exported functions and Queue's methods
// ("Queue.Top"), from its production source.
func exported(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || fn.Name.Name == "Markdown" {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				recv := fn.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				// Queue is the one verb with methods; an error's Error or
				// a row's MarshalJSON is not a verb.
				id, ok := recv.(*ast.Ident)
				if !ok || id.Name != "Queue" {
					continue
				}
				name = id.Name + "." + name
			}
			out = append(out, name)
		}
	}
	return out
}

// TestTableListsEveryVerb: every exported verb is a row of Table (with
// its doors and its rule), and every row is a verb.
func TestTableListsEveryVerb(t *testing.T) {
	var rows []string
	for _, v := range Table {
		if len(v.Doors) == 0 || v.Rule == "" || v.Command == "" {
			t.Errorf("row %s lacks its command, doors or rule", v.Name)
		}
		if slices.Contains(rows, v.Name) {
			t.Errorf("row %s twice", v.Name)
		}
		rows = append(rows, v.Name)
	}
	verbs := exported(t)
	if len(verbs) < 30 {
		t.Fatalf("found %d verbs; the check would prove nothing", len(verbs))
	}
	for _, v := range verbs {
		if !slices.Contains(rows, v) {
			t.Errorf("verb %s is not in Table: add its row (command, doors, rule)", v)
		}
	}
	for _, r := range rows {
		if !slices.Contains(verbs, r) {
			t.Errorf("Table's row %s names no verb", r)
		}
	}
}

// The README's table lives between these lines.
const (
	tableStart = "<!-- verbs table: go test ./verbs -update -->\n"
	tableEnd   = "<!-- end of the verbs table -->\n"
)

// TestReadmeTable: the README's "Who is asking" section shows Table as it
// is (`go test ./verbs -update` rewrites it).
func TestReadmeTable(t *testing.T) {
	path := filepath.Join("..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, tableStart), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no verbs table between %q and %q", tableStart, tableEnd)
	}
	want := readme[:i+len(tableStart)] + Markdown() + readme[j:]
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != readme {
		t.Errorf("README.md's verbs table is not verbs.Table: run go test ./verbs -update")
	}
}
