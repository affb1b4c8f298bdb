// Command swarmbench measures swarm where speed matters and prints one
// table, writing the same figures as JSON (bench/results.json). Every figure
// comes from one run on this machine, and every comparison is a ratio taken
// side by side in the same run:
//
//	P1  mailbox Send rate next to a raw modernc insert of the same row with
//	    the same pragmas, in this process; Broadcast to 10
//	P2  urgent-interrupt latency across processes (and what a session's door
//	    costs at its start, in this process): real `swarm send --urgent`
//	    processes against `swarm up --engine script` whose agent sits in a
//	    long tool call, from the row's created_at (stamped by the sender just
//	    before it writes the row) to the Running→Interrupting event (written
//	    right after the session's context is cancelled)
//	P3  prompt build with 100 pending messages and 20 ready tasks, with a
//	    fast fake bd and with one that takes 300 ms; 10 agents building at
//	    once share one bd run
//	P4  50, 100 and 500 scripted agents (-p4): `swarm up` to all Running,
//	    beyond the checkouts; the supervisor's peak RSS (VmHWM), idle CPU,
//	    open fds; `swarm status` and `swarm send --all`; the live view's
//	    idle CPU. With -base, P2 and P4 run with the previous release's
//	    binary too, and the table shows new/old ratios (base.go)
//	P5  worktree creation per agent (worktree.Manager.Ensure) against a plain
//	    `git worktree add` on the same repository
//	P6  base prompt size per mode and strategy, in bytes and estimated
//	    tokens (chars/4)
//	P7  protocol (run after P1): validated task_dispatches against plain
//	    sends through the same Poster (ratio), and the lag from a stored
//	    ACK deadline to its ack_timeout escalation in a running `swarm up`
//	P8  PostgreSQL, on a throwaway local cluster: P1's send/raw ratio
//	    against a raw pgx insert, and P2 across two supervisors (two
//	    clones): `swarm send --urgent` in one, the agent run by the other,
//	    woken over LISTEN/NOTIFY. Skipped when PostgreSQL is not installed.
//	P9  workflows: one dev-review item whose scripted reviewer rejects every
//	    result, from `swarm workflow start` to locked at max_rejects = 3 in
//	    a real `swarm up`: the model sessions started and the tokens spent
//	    on routing (none: the supervisor routes), against seed 000's
//	    coordinator call of about 3,800 tokens per event
//	P10 teams (DESIGN §9.5): a core pair that acknowledges its pings and 20
//	    scripted members, from `swarm up` to the launch RUNNING (the part
//	    beyond making the worktrees); `swarm spawn` into the running swarm,
//	    from the command to the new agent Running (beyond its worktree add)
//	P11 the sandbox (DESIGN §13.3): one scripted agent running 30
//	    sessions of one `true` bash call, with [sandbox] mode = "none" and
//	    under bubblewrap: BuildingPrompt → Running p50/p99, and Running →
//	    complete (one bwrap per bash call)
//	P12 the web desk (DESIGN §15) in `swarm up --web`: from an escalation
//	    row written by `swarm escalate` to its event on the desk's event
//	    stream, p50/p99 over 50 trials; then 5 streams open on an idle
//	    swarm for 60 s: the supervisor's CPU and its RSS before and after
//	P13 the merge queue (DESIGN §14): `swarm land` → landed against a
//	    running `swarm up` with a 1 s [merge] ci (p50); the CI runs 8
//	    candidates with one bad spend at batch 8 (bisection, read from
//	    `swarm merges --json` and counted by the CI); tokens on routing
//
// Usage (make bench builds bin/swarm first):
//
//	go run ./cmd/swarmbench -bin bin/swarm -out bench/results.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
)

// row is one line of the table and one figure of the JSON.
type row struct {
	ID     string  `json:"id"`
	Figure string  `json:"figure"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Text   string  `json:"text"`             // the value as printed
	Target string  `json:"target,omitempty"` // e.g. "≥ 0.5"
	Status string  `json:"status,omitempty"` // PASS or MISS when there is a target
}

type bench struct {
	bin    string
	rusage string // the start-up helper (internal/rusage), built on first use
	tmp    string
	home   string
	quick  bool
	procs  []*proc
	rows   []row
	// details are the raw measurements behind the rows, by figure.
	details map[string]any
	log     io.Writer
	// dbURL, when set, is the PostgreSQL database the swarm processes use
	// (SWARM_DB_URL): P8.
	dbURL string
	// baseBin is the previous release's binary (-base), and baseName the
	// revision it was built from: P2 and P4 run with it too (base.go).
	baseBin, baseName string
	// prefix names the repositories and logs of the previous binary's
	// runs apart from the new one's ("base-").
	prefix string
}

func (b *bench) add(r row) { b.rows = append(b.rows, r) }

// check adds a row with a target: pass says whether the value meets it.
func (b *bench) check(r row, target string, pass bool) {
	r.Target = target
	r.Status = "MISS"
	if pass {
		r.Status = "PASS"
	}
	b.add(r)
}

func (b *bench) progress(format string, a ...any) {
	fmt.Fprintf(b.log, "swarmbench: "+format+"\n", a...)
}

type results struct {
	GeneratedAt time.Time      `json:"generated_at"`
	Machine     machine        `json:"machine"`
	DurationSec float64        `json:"duration_s"`
	Figures     []row          `json:"figures"`
	Details     map[string]any `json:"details"`
	Errors      []string       `json:"errors,omitempty"`
}

type machine struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
	Git    string `json:"git"`
	Kernel string `json:"kernel"`
	// Load is /proc/loadavg's 1-minute figure when the run started and
	// ended: other work on the machine moves every figure.
	LoadStart string `json:"load_1m_start,omitempty"`
	LoadEnd   string `json:"load_1m_end,omitempty"`
}

func main() {
	bin := flag.String("bin", "bin/swarm", "the swarm binary to measure")
	out := flag.String("out", "bench/results.json", "where to write the JSON figures (empty: nowhere)")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	quick := flag.Bool("quick", false, "fewer samples (for trying the bench, not for figures)")
	only := flag.String("only", "", "comma-separated figures to run, e.g. P2,P4 (default all)")
	base := flag.String("base", "", "also run P2 and P4 with the swarm built from this revision (a tag or commit; auto: the latest tag, else main before its last merge; none: not)")
	flag.Parse()
	os.Exit(run(*bin, *out, *keep, *quick, *only, *base))
}

func run(binPath, out string, keep, quick bool, only, baseSpec string) int {
	start := time.Now()
	loadStart := loadAvg()
	// The packages measured in-process log through slog; keep that quiet.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	bin, err := filepath.Abs(binPath)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "swarmbench: the swarm binary: %v (run 'make build' first)\n", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "swarmbench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "swarmbench:", err)
		return 1
	}
	b := &bench{bin: bin, tmp: tmp, home: filepath.Join(tmp, "home"), quick: quick, details: map[string]any{}, log: os.Stderr}
	if err := os.MkdirAll(b.home, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "swarmbench:", err)
		return 1
	}
	defer func() {
		for _, p := range b.procs {
			if !p.exited() {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
		if keep {
			fmt.Fprintln(os.Stderr, "swarmbench: kept", tmp)
			return
		}
		os.RemoveAll(tmp)
	}()

	ctx := context.Background()
	if rev, err := baseRevision(baseSpec); err != nil || rev != "" {
		if err == nil {
			b.progress("building the previous swarm from %s ...", rev)
			b.baseBin, err = b.buildBase(rev)
		}
		if err != nil {
			b.add(row{ID: "base", Figure: "previous binary: " + firstLine(err.Error()), Status: "MISS", Target: "builds"})
		}
	}
	want := func(id string) bool {
		if only == "" {
			return true
		}
		for _, f := range strings.Split(only, ",") {
			if strings.EqualFold(strings.TrimSpace(f), id) {
				return true
			}
		}
		return false
	}
	steps := []struct {
		id string
		fn func(context.Context) error
	}{
		{"P1", b.p1}, {"P7", b.p7}, {"P2", b.p2}, {"P3", b.p3}, {"P4", b.p4}, {"P5", b.p5}, {"P6", b.p6}, {"P8", b.p8}, {"P9", b.p9}, {"P10", b.p10}, {"P11", b.p11}, {"P12", b.p12}, {"P13", b.p13},
	}
	var errs []string
	for _, s := range steps {
		if !want(s.id) {
			continue
		}
		t0 := time.Now()
		b.progress("%s ...", s.id)
		first := len(b.rows) // the step's rows start here (side by side compares them)
		if err := s.fn(ctx); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", s.id, err))
			b.add(row{ID: s.id, Figure: "failed: " + firstLine(err.Error()), Status: "MISS", Target: "runs"})
		} else if b.baseBin != "" && sideBySide(s.id) {
			b.progress("%s with the previous swarm, %s ...", s.id, b.baseName)
			old, err := b.runBase(ctx, s.id, s.fn)
			b.compare(s.id, first, old, err)
		}
		b.progress("%s done in %s", s.id, time.Since(t0).Round(time.Millisecond))
	}

	m := b.machine()
	m.LoadStart, m.LoadEnd = loadStart, loadAvg()
	res := results{
		GeneratedAt: time.Now().UTC().Round(time.Second),
		Machine:     m,
		DurationSec: round(time.Since(start).Seconds(), 1),
		Figures:     b.rows,
		Details:     b.details,
		Errors:      errs,
	}
	printTable(os.Stdout, res)
	if out != "" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			if err = os.MkdirAll(filepath.Dir(out), 0o755); err == nil {
				err = os.WriteFile(out, append(data, '\n'), 0o644)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "swarmbench: write results:", err)
			return 1
		}
		fmt.Printf("\nwritten to %s\n", out)
	}
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(os.Stderr, "swarmbench:", e)
		}
		return 1
	}
	return 0
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (b *bench) machine() machine {
	m := machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if v, err := exec.Command("git", "--version").Output(); err == nil {
		m.Git = strings.TrimPrefix(strings.TrimSpace(string(v)), "git version ")
	}
	if v, err := exec.Command("uname", "-r").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(v))
	}
	return m
}

func printTable(w io.Writer, res results) {
	m := res.Machine
	fmt.Fprintf(w, "swarm bench · %s/%s · %d CPUs · %s · git %s · %s · %.0f s · load %s→%s\n\n",
		m.OS, m.Arch, m.CPUs, m.Go, m.Git, res.GeneratedAt.Format("2006-01-02 15:04 UTC"), res.DurationSec, m.LoadStart, m.LoadEnd)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tfigure\tvalue\ttarget\tstatus")
	for _, r := range res.Figures {
		text := r.Text
		if text == "" && r.Unit != "" {
			text = fmt.Sprintf("%g %s", r.Value, r.Unit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Figure, text, r.Target, r.Status)
	}
	tw.Flush()
}

// thousands formats n with separators: 12,345.
func thousands(n float64) string { return humanize.Comma(int64(math.Round(n))) }
