package support

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Writer writes numbered keys through its client until stopped,
// remembering which writes etcd acknowledged, when, and the longest run
// of failures.
type Writer struct {
	cli     *clientv3.Client
	mu      sync.Mutex
	acked   []AckedWrite
	errs    int
	longest time.Duration
}

// AckedWrite is a write etcd acknowledged, and when.
type AckedWrite struct {
	Key string
	At  time.Time
}

func (w *Writer) run(ctx context.Context) {
	var failingSince time.Time
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("/test/write/%06d", i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.cli.Put(cctx, key, "v")
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked = append(w.acked, AckedWrite{Key: key, At: time.Now()})
			if !failingSince.IsZero() {
				w.longest = max(w.longest, time.Since(failingSince))
				failingSince = time.Time{}
			}
		case ctx.Err() == nil:
			w.errs++
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
		}
		w.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	if !failingSince.IsZero() {
		w.mu.Lock()
		w.longest = max(w.longest, time.Since(failingSince))
		w.mu.Unlock()
	}
}

// AckedSince is how many writes etcd acknowledged after t.
func (w *Writer) AckedSince(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.acked {
		if a.At.After(t) {
			n++
		}
	}
	return n
}

// AckedKeys are the keys of the writes etcd acknowledged so far, oldest
// first.
func (w *Writer) AckedKeys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, len(w.acked))
	for i, a := range w.acked {
		keys[i] = a.Key
	}
	return keys
}

// LaunchWriter starts a writer on cli; the function it returns stops it.
func LaunchWriter(ctx context.Context, cli *clientv3.Client) (*Writer, func()) {
	w := &Writer{cli: cli}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.run(wctx); close(done) }()
	return w, func() { stop(); <-done }
}

// Lost are the acknowledged writes of a stopped writer that cli does not
// read, oldest first; it logs the writer's figures.
func (w *Writer) Lost(ctx context.Context, t testing.TB, cli *clientv3.Client) []AckedWrite {
	t.Helper()
	var resp *clientv3.GetResponse
	Eventually(t, time.Minute, "a read of the writer's keys", func() error {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		resp, err = cli.Get(rctx, "/test/write/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err
	})
	stored := map[string]bool{}
	for _, kv := range resp.Kvs {
		stored[string(kv.Key)] = true
	}
	var lost []AckedWrite
	for _, a := range w.acked {
		if !stored[a.Key] {
			lost = append(lost, a)
		}
	}
	t.Logf("writer: %d writes acknowledged, %d failed, longest error window %s", len(w.acked), w.errs, w.longest.Round(time.Millisecond))
	if len(w.acked) == 0 {
		t.Fatal("the writer never succeeded")
	}
	return lost
}

// StartWriter starts a writer on cli. The function it returns stops it,
// reports its figures and fails the test when an acknowledged write is
// not in etcd.
func StartWriter(ctx context.Context, t testing.TB, cli *clientv3.Client) func() {
	t.Helper()
	w, stop := LaunchWriter(ctx, cli)
	return func() {
		t.Helper()
		stop()
		if lost := w.Lost(ctx, t, cli); len(lost) > 0 {
			keys := make([]string, 0, len(lost))
			for _, a := range lost[:min(len(lost), 10)] {
				keys = append(keys, a.Key)
			}
			t.Fatalf("%d acknowledged writes are lost: %v", len(lost), keys)
		}
	}
}
