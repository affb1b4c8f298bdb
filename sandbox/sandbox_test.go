package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecide: none is none; a bwrap that is missing or cannot start a
// sandbox stops mode bwrap with the reason and the fix, and makes auto
// fall back to none, saying why.
func TestDecide(t *testing.T) {
	ctx := context.Background()
	d, err := Decide(ctx, None, os.Getenv)
	if err != nil || d.Contained() || d.In() != None || !strings.Contains(d.Why, `mode = "none"`) {
		t.Errorf("none: %+v, %v", d, err)
	}
	failing := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ bwrap, why string }{
		{filepath.Join(t.TempDir(), "missing"), "SWARM_BWRAP="},
		{failing, "fails to start a sandbox: bwrap: setting up uid map: Permission denied"},
	} {
		env := func(k string) string {
			if k == BwrapEnv {
				return tt.bwrap
			}
			return ""
		}
		_, err := Decide(ctx, Bwrap, env)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), Fix) || !strings.Contains(err.Error(), `or set [sandbox] mode = "auto"`) {
			t.Errorf("bwrap with %s: %v", tt.bwrap, err)
		}
		d, err := Decide(ctx, Auto, env)
		if err != nil || d.Contained() {
			t.Errorf("auto with %s: %+v, %v; want a fallback to none", tt.bwrap, d, err)
		}
		if !strings.Contains(d.Why, tt.why) {
			t.Errorf("auto with %s: why %q", tt.bwrap, d.Why)
		}
	}
	if _, err := Decide(ctx, Auto, os.Getenv); err != nil {
		t.Errorf("auto never fails: %v", err)
	}
}
