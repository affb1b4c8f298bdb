package worktree

import (
	"context"
	"testing"

	"github.com/swarmhq/swarm/internal/gittest"
)

func TestCommitExists(t *testing.T) {
	root := gittest.Repo(t, map[string]string{"a.txt": "a\n"})
	head := gittest.Git(t, root, "rev-parse", "HEAD")
	tree := gittest.Git(t, root, "rev-parse", "HEAD^{tree}")
	m, err := New(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for hash, want := range map[string]bool{
		head:                 true,
		head[:7]:             true,
		tree:                 false, // an object, but not a commit
		"0000000":            false,
		"deadbeefdeadbeef":   false,
		"HEAD":               false, // a name, not a hash
		"--output=/tmp/x":    false,
		"abc1234^{commit} x": false,
	} {
		got, err := m.CommitExists(context.Background(), hash)
		if err != nil || got != want {
			t.Errorf("CommitExists(%q) = %v, %v; want %v", hash, got, err, want)
		}
	}
}
