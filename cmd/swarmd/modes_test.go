package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/swarmhq/swarm/mode"
	"github.com/swarmhq/swarm/promptpipe"
)

type noEnv struct{}

func (noEnv) Getenv(string) string { return "" }

// Every swarm command line section 3 lists, for every mode, strategy and
// profile, is a real command: its --help succeeds.
func TestModeInstructionCommandsExist(t *testing.T) {
	specs := []mode.Spec{{Mode: mode.Code}, {Mode: mode.Review}, {Mode: mode.Delegate}}
	for _, m := range []mode.Mode{mode.ExecuteMode, mode.CoordinateMode} {
		for _, s := range m.Kind().Strategies() {
			specs = append(specs, mode.Spec{Mode: m, Strategy: s})
		}
	}
	code := regexp.MustCompile("`(swarm [^`]*)`")
	seen := map[string]bool{}
	for _, s := range specs {
		body := promptpipe.ModeInstructions(s, nil, true)
		lines := code.FindAllStringSubmatch(body, -1)
		if len(lines) == 0 {
			t.Fatalf("%s/%s: no swarm command listed", s.Mode, s.EffectiveStrategy())
		}
		for _, l := range lines {
			var argv []string
			for _, w := range strings.Fields(l[1])[1:] {
				if strings.ContainsAny(w[:1], `<["-`) {
					break
				}
				argv = append(argv, w)
			}
			key := strings.Join(argv, " ")
			if seen[key] {
				continue
			}
			seen[key] = true
			var out, errb bytes.Buffer
			app := &App{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Env: noEnv{}, Cwd: t.TempDir()}
			if rc := run(context.Background(), app, append(argv, "--help")); rc != 0 || !strings.Contains(out.String(), "Usage:") {
				t.Errorf("%s/%s lists `%s`, but `swarm %s --help` exits %d: %s", s.Mode, s.EffectiveStrategy(), l[1], key, rc, errb.String())
			}
		}
	}
	for _, want := range []string{"send", "report progress", "report session", "queue start", "status"} {
		if !seen[want] {
			t.Errorf("no mode lists `swarm %s`", want)
		}
	}
}
