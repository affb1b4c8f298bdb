package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Side by side: the previous release's binary, built from a revision of
// this repository into the bench's temporary directory, runs the figures
// whose regressions matter most (P2's urgent send including its process,
// P4's swarm sizes) in the same run, and the table shows new/old ratios.

// sideBySide lists the steps run again with the previous binary: P2 and
// its variants (P2b), and P4.
func sideBySide(id string) bool { return strings.HasPrefix(id, "P2") || id == "P4" }

// baseRevision resolves -base: "auto" is the latest tag, else the first
// parent of the newest merge (main before the last branch merged), else
// HEAD~1; "" or "none" is no side-by-side run.
func baseRevision(spec string) (string, error) {
	switch spec {
	case "", "none":
		return "", nil
	case "auto":
		if out, err := exec.Command("git", "describe", "--tags", "--abbrev=0").Output(); err == nil {
			return strings.TrimSpace(string(out)), nil
		}
		if out, err := exec.Command("git", "rev-list", "--merges", "-n1", "HEAD").Output(); err == nil && len(strings.TrimSpace(string(out))) > 0 {
			return strings.TrimSpace(string(out)) + "^1", nil
		}
		return "HEAD~1", nil
	}
	return spec, nil
}

// buildBase checks rev out with `git worktree add` into the temporary
// directory and builds its swarm binary there; the checkout is removed
// again, the binary stays with the bench's other files.
func (b *bench) buildBase(rev string) (string, error) {
	hash, err := exec.Command("git", "rev-parse", "--short", rev+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("-base %s: not a commit of this repository (set SWARM_BENCH_BASE to a tag or commit, or none)", rev)
	}
	src := filepath.Join(b.tmp, "base-src")
	if out, err := exec.Command("git", "worktree", "add", "-q", "--detach", src, rev).CombinedOutput(); err != nil {
		return "", fmt.Errorf("check out %s: %v: %s", rev, err, out)
	}
	defer exec.Command("git", "worktree", "remove", "--force", src).Run()
	// A release with the front (cmd/swarmd beside cmd/swarm) is built as
	// installed, both binaries in one directory; an older one is one
	// binary.
	dir := filepath.Join(b.tmp, "base-bin")
	bin := filepath.Join(dir, "swarm")
	pkgs := []string{"./cmd/swarm"}
	if _, err := os.Stat(filepath.Join(src, "cmd", "swarmd")); err == nil {
		pkgs = append(pkgs, "./cmd/swarmd")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("go", append([]string{"build", "-trimpath", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v: %s", rev, err, tail(string(out), 1000))
	}
	b.baseName = strings.TrimSpace(string(hash))
	if !strings.HasPrefix(rev, b.baseName) {
		b.baseName = fmt.Sprintf("%s (%s)", rev, b.baseName)
	}
	return bin, nil
}

// runBase runs step with the previous binary and returns its rows (the
// new binary's rows and details are left as they were).
func (b *bench) runBase(ctx context.Context, id string, step func(context.Context) error) ([]row, error) {
	bin, rows, details := b.bin, b.rows, b.details
	b.bin, b.rows, b.details, b.prefix = b.baseBin, nil, map[string]any{}, "base-"
	err := step(ctx)
	old := b.rows
	b.bin, b.rows, b.details, b.prefix = bin, rows, details, ""
	return old, err
}

// compare adds, after the new binary's rows of step id (b.rows[first:],
// whatever their IDs: P2's step adds P2b's), the previous binary's figure
// and the ratio new/old for each row both measured; a step the old binary
// could not run says so in its row.
func (b *bench) compare(id string, first int, old []row, err error) {
	if err != nil {
		b.add(row{ID: id, Figure: "  previous " + b.baseName + ": could not run: " + firstLine(err.Error())})
		return
	}
	prev := map[string]row{}
	for _, r := range old {
		prev[r.ID+"\x00"+r.Figure] = r
	}
	var out []row
	for _, r := range b.rows[first:] {
		o, ok := prev[r.ID+"\x00"+r.Figure]
		if !ok || r.Unit == "" || o.Unit != r.Unit || o.Value == 0 {
			continue
		}
		text := o.Text
		if text == "" {
			text = fmt.Sprintf("%g %s", o.Value, o.Unit)
		}
		out = append(out, row{ID: r.ID, Figure: "  previous " + b.baseName + ": " + strings.TrimSpace(r.Figure), Value: round(r.Value/o.Value, 2), Unit: "ratio",
			Text: fmt.Sprintf("%s → new/old %.2f", text, r.Value/o.Value)})
	}
	if len(out) == 0 {
		b.add(row{ID: id, Figure: "  previous " + b.baseName + ": no figure to compare (it measured none of these rows)"})
	}
	b.rows = append(b.rows, out...)
}
