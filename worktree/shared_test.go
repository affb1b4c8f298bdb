package worktree

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCoalescerShares: callers that ask while a read runs share the next
// read; none gets a read that started before it asked.
func TestCoalescerShares(t *testing.T) {
	var c coalescer[int]
	ctx := context.Background()
	var reads atomic.Int32
	started := make(chan struct{})
	release := make(chan struct{})
	first := make(chan int, 1)
	go func() {
		v, _ := c.do(ctx, func(context.Context) (int, error) {
			reads.Add(1)
			close(started)
			<-release
			return 1, nil
		})
		first <- v
	}()
	<-started
	// Three guards ask while the first read runs: it started before
	// they asked, so they wait for the next one, and share it.
	const late = 3
	var wg sync.WaitGroup
	got := make([]int, late)
	for i := range late {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = c.do(ctx, func(context.Context) (int, error) {
				return int(reads.Add(1)), nil
			})
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.waiting() != late {
		if time.Now().After(deadline) {
			t.Fatalf("%d caller(s) waiting, want %d", c.waiting(), late)
		}
		time.Sleep(time.Millisecond) // polling the coalescer, with a deadline
	}
	close(release)
	wg.Wait()
	if v := <-first; v != 1 {
		t.Fatalf("first caller got %d", v)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (the first, and one shared by the late callers)", n)
	}
	for i, v := range got {
		if v != 2 {
			t.Errorf("late caller %d got read %d, want 2", i, v)
		}
	}
}

// TestRefsInternShares: snapshots that saw the same refs share one map,
// so agents' baselines do not each hold every branch.
func TestRefsInternShares(t *testing.T) {
	var r refsIntern
	a := r.intern(map[string]string{"refs/heads/main": "aaa", "refs/heads/swarm/x": "bbb"})
	b := r.intern(map[string]string{"refs/heads/main": "aaa", "refs/heads/swarm/x": "bbb"})
	if reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer() {
		t.Fatal("equal refs got two maps")
	}
	c := r.intern(map[string]string{"refs/heads/main": "aaa", "refs/heads/swarm/x": "ccc"})
	if len(c) != 2 || c["refs/heads/swarm/x"] != "ccc" || a["refs/heads/swarm/x"] != "bbb" {
		t.Fatalf("changed refs: %v (first %v)", c, a)
	}
}
