package coordinator

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestStopServing(t *testing.T) {
	cases := []struct {
		name string
		// clientsDone is when the fake server returns on its own (its
		// clients hung up); 0 means only cancel ends it.
		clientsDone time.Duration
		nilServed   bool
		grace       time.Duration
		// wantCancelBefore says cancel must come before the server ended.
		wantCancelBefore bool
		minWait          time.Duration
		maxWait          time.Duration
	}{
		{name: "clients hang up within the grace", clientsDone: 50 * time.Millisecond, grace: 5 * time.Second, minWait: 50 * time.Millisecond, maxWait: 2 * time.Second},
		{name: "a client stays connected", grace: 100 * time.Millisecond, wantCancelBefore: true, minWait: 100 * time.Millisecond, maxWait: 3 * time.Second},
		{name: "no server", nilServed: true, grace: 5 * time.Second, wantCancelBefore: true, maxWait: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var canceled, ended atomic.Bool
			cancelCh := make(chan struct{})
			var served chan struct{}
			if !tc.nilServed {
				served = make(chan struct{})
				go func() {
					var own <-chan time.Time
					if tc.clientsDone > 0 {
						own = time.After(tc.clientsDone)
					}
					select {
					case <-own:
					case <-cancelCh:
					}
					ended.Store(true)
					close(served)
				}()
			}
			cancel := func() {
				if !ended.Load() && !tc.wantCancelBefore {
					t.Errorf("canceled while the server still had clients")
				}
				canceled.Store(true)
				close(cancelCh)
			}
			t0 := time.Now()
			stopServing(cancel, served, tc.grace)
			d := time.Since(t0)
			if !canceled.Load() {
				t.Errorf("the server was not canceled")
			}
			if served != nil && !ended.Load() {
				t.Errorf("stopServing returned before the server ended")
			}
			if d < tc.minWait || d > tc.maxWait {
				t.Errorf("stopServing took %v, want between %v and %v", d, tc.minWait, tc.maxWait)
			}
		})
	}
}
