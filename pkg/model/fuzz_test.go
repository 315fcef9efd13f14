package model

import (
	"encoding/binary"
	"testing"
)

// FuzzRandomWalk follows the behaviour the input selects: each byte picks
// one of the enabled steps. Every state on the way must satisfy every
// invariant, survive the Key round trip, and be reached by a step that
// Apply reproduces from its name.
func FuzzRandomWalk(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte{255, 254, 253, 252, 7, 7, 7, 7, 7, 3, 3, 3, 3, 3, 3, 9, 9, 9})
	f.Fuzz(func(t *testing.T, choices []byte) {
		st := Init()[0]
		for i, c := range choices {
			if name, bad := Lazaret.Violated(&st); bad {
				t.Fatalf("after %d steps: %s violated in\n%s", i, name, st)
			}
			if st.Key().State() != st {
				t.Fatalf("after %d steps: Key round trip changed\n%s", i, st)
			}
			steps := Successors(st)
			if len(steps) == 0 {
				return
			}
			step := steps[int(c)%len(steps)]
			again, ok := Lazaret.Apply(st, step.Action, step.Params...)
			if !ok || again != step.Next {
				t.Fatalf("Apply(%s) does not reproduce the step", step)
			}
			st = step.Next
		}
		if name, bad := Lazaret.Violated(&st); bad {
			t.Fatalf("%s violated in\n%s", name, st)
		}
	})
}

// FuzzKeyDecode decodes arbitrary keys: a decoded state that satisfies
// TypeOK must encode back to the same 78 bits.
func FuzzKeyDecode(f *testing.F) {
	k := maxState().Key()
	f.Add(k[0], k[1])
	k = initState().Key()
	f.Add(k[0], k[1])
	f.Add(uint64(0), uint64(0))
	f.Add(^uint64(0), ^uint64(0))
	f.Fuzz(func(t *testing.T, lo, hi uint64) {
		k := Key{lo, hi}
		st := k.State()
		if !Lazaret.TypeOK(&st) {
			return
		}
		mask := Key{^uint64(0), 1<<(keyBits-64) - 1}
		want := Key{k[0] & mask[0], k[1] & mask[1]}
		if got := st.Key(); got != want {
			var a, b [16]byte
			binary.BigEndian.PutUint64(a[:8], got[1])
			binary.BigEndian.PutUint64(a[8:], got[0])
			binary.BigEndian.PutUint64(b[:8], want[1])
			binary.BigEndian.PutUint64(b[8:], want[0])
			t.Fatalf("re-encoded %x, want %x", a, b)
		}
	})
}
