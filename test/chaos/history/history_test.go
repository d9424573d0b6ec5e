package history

import (
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestLinearizable checks the checker: a read of a value older than an
// acknowledged put that ended before the read began is illegal; a failed
// put may or may not show.
func TestLinearizable(t *testing.T) {
	t.Parallel()
	failed := errors.New("timed out")
	tests := []struct {
		name string
		ops  []Op
		errs []error
		want porcupine.CheckResult
	}{
		{"read your write", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Value: "1"}}, []error{nil, nil}, porcupine.Ok},
		{"stale read after an acknowledged put", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Put: true, Value: "2"}, {Key: "k", Value: "1"}}, []error{nil, nil, nil}, porcupine.Illegal},
		{"a failed put that was applied", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Value: "1"}}, []error{failed, nil}, porcupine.Ok},
		{"a failed put that was not", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Value: ""}}, []error{failed, nil}, porcupine.Ok},
		{"a lost acknowledged put", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Value: ""}}, []error{nil, nil}, porcupine.Illegal},
		{"keys are independent", []Op{{Key: "a", Put: true, Value: "1"}, {Key: "b", Value: ""}, {Key: "a", Value: "1"}}, []error{nil, nil, nil}, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := New()
			for i, o := range tt.ops {
				o.Call = h.Now()
				time.Sleep(time.Microsecond)
				h.Add(o, 1, tt.errs[i])
			}
			if got := h.Linearizable(10 * time.Second); got != tt.want {
				t.Errorf("Linearizable() = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestLostWrites checks that a final value older than the last
// acknowledged put is reported, and a newer one (a failed put that was
// applied) is not.
func TestLostWrites(t *testing.T) {
	t.Parallel()
	h := New()
	h.Add(Op{Key: "a", Put: true, Value: "4"}, 1, nil)
	h.Add(Op{Key: "a", Put: true, Value: "6"}, 1, errors.New("timed out"))
	h.Add(Op{Key: "b", Put: true, Value: "5"}, 1, nil)
	got := h.LostWrites(map[string]string{"a": "6", "b": "3"})
	if len(got) != 1 || got[0] != `b: acknowledged 5, reads "3"` {
		t.Errorf("LostWrites() = %v", got)
	}
}

// TestLinearizableRebuilt: a cluster rebuilt from a survivor may read a
// value older than a put acknowledged before the rebuild, but from then
// on it must be linearizable again.
func TestLinearizableRebuilt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		ops   []Op // the first two before the rebuild
		whole porcupine.CheckResult
		split porcupine.CheckResult
	}{
		{"rolled back, then consistent", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Put: true, Value: "2"}, {Key: "k", Value: "1"}, {Key: "k", Value: "1"}, {Key: "k", Put: true, Value: "3"}, {Key: "k", Value: "3"}}, porcupine.Illegal, porcupine.Ok},
		{"a stale read after the rebuild", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Put: true, Value: "2"}, {Key: "k", Value: "1"}, {Key: "k", Put: true, Value: "3"}, {Key: "k", Value: "1"}}, porcupine.Illegal, porcupine.Illegal},
		{"a value that comes back without a put", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Put: true, Value: "2"}, {Key: "k", Value: "1"}, {Key: "k", Value: "2"}}, porcupine.Illegal, porcupine.Illegal},
		{"a stale read before the rebuild", []Op{{Key: "k", Put: true, Value: "1"}, {Key: "k", Value: ""}, {Key: "k", Value: "1"}}, porcupine.Illegal, porcupine.Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := New()
			var rebuilt int64
			for i, o := range tt.ops {
				if i == 2 {
					rebuilt = h.Now()
					time.Sleep(time.Microsecond)
				}
				o.Call = h.Now()
				time.Sleep(time.Microsecond)
				h.Add(o, uint64(min(i/2, 1)+1), nil)
			}
			if got := h.Linearizable(10 * time.Second); got != tt.whole {
				t.Errorf("Linearizable() = %s, want %s", got, tt.whole)
			}
			if got := h.LinearizableRebuilt(10*time.Second, rebuilt); got != tt.split {
				t.Errorf("LinearizableRebuilt() = %s, want %s", got, tt.split)
			}
		})
	}
}
