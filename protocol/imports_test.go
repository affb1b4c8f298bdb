package protocol

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsStayPure keeps the package a leaf that anything may call: the
// standard library and the JSON Schema library only, never storage
// (database/sql, SQLite) or the mailbox.
func TestImportsStayPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"github.com/google/jsonschema-go/jsonschema", "github.com/swarmhq/swarm/internal/text"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.Split(path, "/")[0], ".")
			ok := std && path != "database/sql" && !strings.HasPrefix(path, "database/sql/")
			for _, a := range allowed {
				ok = ok || strings.HasPrefix(path, a)
			}
			if !ok {
				t.Errorf("%s imports %s; the protocol package must stay pure (no storage, no mailbox)", f, path)
			}
		}
	}
}
