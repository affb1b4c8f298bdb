package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// quietScript: an agent that only answers its mail, and has none.
const quietScript = `after = "mail"

[[session]]
[[session.turn]]
text = "Done."
`

type p12Details struct {
	Trials int  `json:"trials"`
	Event  dist `json:"escalation_to_event"`
	// Streams event streams stayed open for IdleSec on an idle swarm:
	// the supervisor's CPU over that time, and its resident set before
	// and after.
	Streams     int     `json:"streams"`
	IdleSec     float64 `json:"idle_s"`
	CPUPercent  float64 `json:"cpu_percent"`
	RSSBeforeKB int64   `json:"rss_before_kib"`
	RSSAfterKB  int64   `json:"rss_after_kib"`
}

var deskURL = regexp.MustCompile(`swarm web: the operator's desk is at (http://\S+)/\?token=([0-9a-f]+)`)

// p12 is the web desk (DESIGN §15) served by `swarm up --web`: from an
// escalation row written (`swarm escalate`, a process of its own, with the
// row's created_at) to its event read off the desk's event stream, as a
// browser's EventSource reads it; then 5 streams open on an idle swarm,
// and what they cost the supervisor.
func (b *bench) p12(ctx context.Context) error {
	trials, idle := 50, 60*time.Second
	if b.quick {
		trials, idle = 10, 10*time.Second
	}
	dir, err := b.newSwarm("p12", []string{"quiet"}, quietScript, 0)
	if err != nil {
		return err
	}
	log := "p12-up.log"
	up, err := b.start(dir, log, "up", "--engine", "script", "--no-tui", "--web")
	if err != nil {
		return err
	}
	defer stopUp(up) //nolint:errcheck // measured already
	var base, token string
	err = waitFor(ctx, 60*time.Second, 10*time.Millisecond, "the desk's URL", func() (bool, error) {
		if up.exited() {
			return false, b.upExited(up, log)
		}
		data, _ := os.ReadFile(filepath.Join(b.tmp, log))
		if m := deskURL.FindSubmatch(data); m != nil {
			base, token = string(m[1]), string(m[2])
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	st, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := b.waitIdle(ctx, up, log, st, 1); err != nil {
		return err
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan struct {
		id int64
		at time.Time
	}, 1024)
	opened := make(chan error, 1)
	go func() {
		opened <- readEvents(sctx, base, token, func(text string) {
			// "escalation 12 open"
			if f := strings.Fields(text); len(f) == 3 && f[0] == "escalation" && f[2] == "open" {
				if id, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					got <- struct {
						id int64
						at time.Time
					}{id, time.Now()}
				}
			}
		}, nil)
	}()
	var lat []time.Duration
	for i := range trials {
		if _, err := b.swarm(dir, "escalate", fmt.Sprintf("p12 trial %d", i), "--severity", "info"); err != nil {
			return err
		}
		select {
		case ev := <-got:
			e, err := st.Escalation(ctx, ev.id)
			if err != nil {
				return err
			}
			lat = append(lat, ev.at.Sub(e.CreatedAt))
		case err := <-opened:
			return fmt.Errorf("the event stream ended: %v", err)
		case <-time.After(10 * time.Second):
			return fmt.Errorf("trial %d: no event within 10s", i)
		}
	}
	det := p12Details{Trials: trials, Event: summarize(lat), Streams: 5, IdleSec: idle.Seconds()}

	// Five more streams, then an idle span.
	var wg sync.WaitGroup
	ready := make(chan struct{}, det.Streams)
	for range det.Streams {
		wg.Go(func() { readEvents(sctx, base, token, func(string) {}, ready) }) //nolint:errcheck // ends with sctx
	}
	for range det.Streams {
		select {
		case <-ready:
		case <-time.After(10 * time.Second):
			return errors.New("an event stream did not open within 10s")
		}
	}
	pid := up.cmd.Process.Pid
	rss0, _ := vmRSS(pid)
	cpu0, err := cpuTicksOf(pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	// The one span here is the measurement itself.
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	cpu1, err := cpuTicksOf(pid)
	if err != nil {
		return err
	}
	rss1, _ := vmRSS(pid)
	det.CPUPercent = round(100*float64(cpu1-cpu0)/100/time.Since(t0).Seconds(), 2) // USER_HZ: ticks of 1/100 s
	det.RSSBeforeKB, det.RSSAfterKB = rss0>>10, rss1>>10
	cancel()
	wg.Wait()
	b.details["P12"] = det

	b.check(row{ID: "P12", Figure: fmt.Sprintf("web desk: escalation row → its event on the page's stream, p50 / p99 (%d trials)", trials), Value: det.Event.P99, Unit: "ms",
		Text: fmt.Sprintf("%.1f / %.1f ms", det.Event.P50, det.Event.P99)}, "p99 < 100 ms", det.Event.P99 < 100)
	b.check(row{ID: "P12", Figure: fmt.Sprintf("  supervisor CPU, %d streams open on an idle swarm for %s", det.Streams, idle), Value: det.CPUPercent, Unit: "%",
		Text: fmt.Sprintf("%.2f %%", det.CPUPercent)}, "< 2 %", det.CPUPercent < 2)
	grew := det.RSSAfterKB - det.RSSBeforeKB
	b.check(row{ID: "P12", Figure: "  supervisor RSS over that span", Value: float64(grew), Unit: "KiB",
		Text: fmt.Sprintf("%d → %d KiB", det.RSSBeforeKB, det.RSSAfterKB)}, "no growth (< 1 MiB)", grew < 1024)
	return nil
}

// readEvents reads the desk's event stream with the bearer token, calling
// on with each notice's text; ready (when set) gets a value once the
// stream is open.
func readEvents(ctx context.Context, base, token string, on func(text string), ready chan<- struct{}) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("events: %s", resp.Status)
	}
	if ready != nil {
		ready <- struct{}{}
	}
	textRe := regexp.MustCompile(`"text":"([^"]*)"`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if m := textRe.FindStringSubmatch(data); m != nil {
				on(m[1])
			}
		}
	}
	return sc.Err()
}

// cpuTicksOf is a process's user+system CPU time in clock ticks.
func cpuTicksOf(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + k, errors.Join(err1, err2)
}

// vmRSS reads a process's resident set size in bytes.
func vmRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}
