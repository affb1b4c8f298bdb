package swarm

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/config"
	execengine "github.com/swarmhq/swarm/engine/exec"
	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestExecPromptsAreHonest renders Mode Instructions for exec agents, one
// golden file per CLI and mode: the CLI's own tools as the session's
// limits leave them, the swarm MCP tools, and no claim the CLI cannot
// keep (codex keeps a read-only shell; a custom command keeps everything).
func TestExecPromptsAreHonest(t *testing.T) {
	for _, preset := range append(append([]string(nil), config.Presets...), "custom") {
		for _, m := range []mode.Mode{mode.Code, mode.Review} {
			opts := execengine.Options{Name: preset, Preset: preset}
			if preset == "custom" {
				opts = execengine.Options{Name: "mycli", Command: []string{"mycli", "--json"}}
			}
			eng, err := execengine.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			spec := mode.Spec{Mode: m}
			v := spec.Vector()
			cli := cliTools(eng, v)
			if cli == nil {
				t.Fatalf("%s: an exec engine gives no CLI tools", preset)
			}
			body := promptpipe.ModeInstructionsFor(spec, v, true, cli)
			name := filepath.Join("testdata", "golden", "cli", preset+"_"+string(m)+".golden")
			if *updateGolden {
				if err := os.WriteFile(name, []byte(body+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if body+"\n" != string(want) {
				t.Errorf("%s differs from what renders now:\n%s", name, body)
			}
			// Never the in-process tools' claim, never a tool the
			// session does not have.
			if strings.Contains(body, "You have no others") || strings.Contains(body, "the `swarm` tool") {
				t.Errorf("%s/%s claims the in-process tools:\n%s", preset, m, body)
			}
			if m == mode.Review {
				for _, off := range []string{"Edit", "Write", "Bash", "write_file", "replace", "run_shell_command", "apply_patch"} {
					if strings.Contains(body, off+",") || strings.Contains(body, off+")") {
						t.Errorf("%s/review names %s:\n%s", preset, off, body)
					}
				}
			}
		}
	}
}
