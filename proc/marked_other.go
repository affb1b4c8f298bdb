//go:build !linux

package proc

import (
	"context"
	"time"
)

// BecomeSubreaper is Linux-only; elsewhere orphans go to init.
func BecomeSubreaper() error { return nil }

// Marked cannot read other processes' environments without /proc.
func Marked(markers ...string) (pids []int, known bool) { return nil, false }

// KillMarked cannot find marked processes without /proc.
func KillMarked(markers ...string) []int { return nil }

// ReapOrphans has no orphans to reap without a subreaper.
func ReapOrphans() int { return 0 }

// AwaitGone cannot tell zombies apart without /proc: it waits for kill(2).
func AwaitGone(pids []int, poll, max time.Duration, sleep func(time.Duration)) bool {
	for waited := time.Duration(0); ; waited += poll {
		alive := false
		for _, pid := range pids {
			alive = alive || Alive(pid)
		}
		if !alive {
			return true
		}
		if waited >= max {
			return false
		}
		sleep(poll)
	}
}

// ReapWhile has nothing to reap without a subreaper.
func ReapWhile(ctx context.Context) {}
