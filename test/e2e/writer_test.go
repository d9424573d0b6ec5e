package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writer writes numbered keys through the client Service until stopped,
// remembering which writes etcd acknowledged and the longest run of
// failures.
type writer struct {
	cli     *clientv3.Client
	mu      sync.Mutex
	acked   []string
	errs    int
	longest time.Duration
}

func (w *writer) run(ctx context.Context) {
	var failingSince time.Time
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("/e2e/write/%06d", i)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := w.cli.Put(cctx, key, "v")
		cancel()
		w.mu.Lock()
		switch {
		case err == nil:
			w.acked = append(w.acked, key)
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

// startWriter starts a writer on cli. The function it returns stops it,
// reports its figures and fails the test when an acknowledged write is
// not in etcd.
func startWriter(ctx context.Context, t *testing.T, cli *clientv3.Client) func() {
	t.Helper()
	w := &writer{cli: cli}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.run(wctx); close(done) }()
	return func() {
		t.Helper()
		stop()
		<-done
		resp, err := cli.Get(ctx, "/e2e/write/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]bool{}
		for _, kv := range resp.Kvs {
			stored[string(kv.Key)] = true
		}
		var lost []string
		for _, k := range w.acked {
			if !stored[k] {
				lost = append(lost, k)
			}
		}
		slices.Sort(lost)
		t.Logf("writer: %d writes acknowledged, %d failed, longest error window %s", len(w.acked), w.errs, w.longest.Round(time.Millisecond))
		if len(lost) > 0 {
			t.Fatalf("%d acknowledged writes are lost: %v", len(lost), lost[:min(len(lost), 10)])
		}
		if len(w.acked) == 0 {
			t.Fatal("the writer never succeeded")
		}
	}
}
