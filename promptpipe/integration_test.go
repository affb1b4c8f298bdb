package promptpipe

import (
	"strings"
	"testing"
)

// TestIntegrationGoldens renders the Environment section with what swarm
// did to the branch and what its trial merges found, one golden per case.
func TestIntegrationGoldens(t *testing.T) {
	conflicts := make([]string, 12)
	for i := range conflicts {
		conflicts[i] = "web/page" + string(rune('a'+i)) + ".ts"
	}
	for name, in := range map[string]*Integration{
		"merged": {Base: "main",
			Merged:        &BaseMerge{Commit: "abc1234", Commits: 3, Authors: []string{"bob", "carol"}},
			BaseConflicts: []string{"x.go"},
			Overlaps: []Overlap{
				{Teammate: "frontend", Files: []string{"api/users.go"}, Conflicts: []string{"api/users.go"}},
				{Teammate: "lead", Files: conflicts},
			}},
		"fast_forward": {Base: "main", Merged: &BaseMerge{Commit: "abc1234", Commits: 1, Authors: []string{"operator"}, FastForward: true}},
		"conflict":     {Base: "main", Behind: &BaseBehind{Commit: "abc1234", Commits: 2, Conflicts: []string{"api/users.go", "x.go"}}, BaseConflicts: []string{"api/users.go", "x.go"}},
		"dirty":        {Base: "develop", Behind: &BaseBehind{Commit: "abc1234", Commits: 5, Dirty: true}},
		"failed":       {Base: "main", Behind: &BaseBehind{Reason: "a git lock is in use: index.lock is held by git (pid 42)"}},
		"skipped":      {Base: "main", Behind: &BaseBehind{Commit: "abc1234", Commits: 1, Reason: "the worktree is in the middle of a rebase"}},
	} {
		t.Run(name, func(t *testing.T) {
			pc := freshContext()
			pc.Integration = in
			p := Render(pc, Sources{Env: env()}, defaultConfig, now)
			s, ok := p.Section(SecEnvironment)
			if !ok {
				t.Fatal("no environment section")
			}
			checkGolden(t, "integration/"+name+".golden", s.Body+"\n")
		})
	}
}

// TestIntegrationNilShowsNothing: without news the section is as before.
func TestIntegrationNilShowsNothing(t *testing.T) {
	pc := freshContext()
	plain := Render(pc, Sources{Env: env()}, defaultConfig, now)
	pc.Integration = &Integration{Base: "main"}
	empty := Render(pc, Sources{Env: env()}, defaultConfig, now)
	if plain.Text != empty.Text || strings.Contains(plain.Text, "swarm merged") {
		t.Fatal("an empty Integration changed the prompt")
	}
}
