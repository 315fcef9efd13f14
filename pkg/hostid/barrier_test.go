package hostid

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

func testIdentity(b byte) PidfsProcessIdentityV1 {
	return PidfsProcessIdentityV1{Authority: PidfsProcessAuthorityV1{BootID: BootID{b, 1}, PidfsDev: 17, PidfsInode: uint64(b) + 100}, HostPID: uint32(b) + 1000, StartTimeTicks: 5}
}

func testStaged() StagedProcessOwnership {
	return StagedProcessOwnership{
		Version: V1, DomainID: ids.DomainID{1}, GenerationID: ids.GenerationID{2}, CoordinatorID: ids.CoordinatorID{3},
		Slot: SlotSandboxAttachedRunsc, Identity: testIdentity(9),
	}
}

func TestBarrier(t *testing.T) {
	staged := testStaged()
	ack := ProcessOwnershipCommitAck{Version: V1, Committed: staged}
	mutate := func(f func(*ProcessOwnershipCommitAck)) ProcessOwnershipCommitAck {
		a := ack
		f(&a)
		return a
	}
	mismatches := map[string]ProcessOwnershipCommitAck{
		"slot":        mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.Slot = SlotSandboxRuntimeSupervisor }),
		"domain":      mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.DomainID[0] ^= 1 }),
		"generation":  mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.GenerationID[0] ^= 1 }),
		"coordinator": mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.CoordinatorID[0] ^= 1 }),
		"authority":   mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.Identity.Authority.PidfsInode++ }),
		"pid":         mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.Identity.HostPID++ }),
		"start time":  mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.Identity.StartTimeTicks++ }),
	}
	b, err := NewBarrier(staged)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range mismatches {
		t.Run("mismatched "+name, func(t *testing.T) {
			if err := b.Accept(a); !errors.Is(err, ErrAckMismatch) {
				t.Fatalf("= %v, want ErrAckMismatch", err)
			}
			if b.Released() {
				t.Fatal("released by a mismatched ack")
			}
		})
	}
	t.Run("unknown version", func(t *testing.T) {
		for _, a := range []ProcessOwnershipCommitAck{
			mutate(func(a *ProcessOwnershipCommitAck) { a.Version = 2 }),
			mutate(func(a *ProcessOwnershipCommitAck) { a.Committed.Version = 0 }),
		} {
			if err := b.Accept(a); !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("= %v, want ErrUnknownVersion", err)
			}
		}
		if b.Released() {
			t.Fatal("released by an unknown-version ack")
		}
	})
	t.Run("matching releases once", func(t *testing.T) {
		if err := b.Accept(ack); err != nil {
			t.Fatal(err)
		}
		select {
		case <-b.Done():
		default:
			t.Fatal("Done not closed")
		}
		if err := b.Accept(ack); !errors.Is(err, ErrAckDuplicate) {
			t.Fatalf("duplicate = %v", err)
		}
		if b.Abandon() {
			t.Fatal("abandoned a released barrier")
		}
	})
	t.Run("late after abandon", func(t *testing.T) {
		b, _ := NewBarrier(staged)
		if !b.Abandon() {
			t.Fatal("Abandon of a pending barrier reported false")
		}
		if err := b.Accept(ack); !errors.Is(err, ErrBarrierAbandoned) {
			t.Fatalf("late = %v", err)
		}
		if b.Released() {
			t.Fatal("released after abandon")
		}
	})
	t.Run("invalid staged", func(t *testing.T) {
		bad := staged
		bad.Slot = 0
		if _, err := NewBarrier(bad); !errors.Is(err, ErrInvalidStaged) {
			t.Fatalf("= %v", err)
		}
		bad = staged
		bad.Version = 2
		if _, err := NewBarrier(bad); !errors.Is(err, ErrUnknownVersion) {
			t.Fatalf("= %v", err)
		}
	})
}

func TestAckPostcardGolden(t *testing.T) {
	ack := ProcessOwnershipCommitAck{Version: V1, Committed: testStaged()}
	got := postcard.Marshal(&ack)
	want, _ := hex.DecodeString(
		"00" + // ack version V1
			"00" + // staged version V1
			"01" + "00000000000000000000000000000000000000000000000000000000000000" + // domain_id
			"02" + "000000000000000000000000000000" + // generation_id
			"03" + "000000000000000000000000000000" + // coordinator_id
			"02" + // slot SandboxAttachedRunsc (variant 2)
			"0901000000000000000000000000000011" + "6d" + // boot_id, dev 17, ino 109
			"f107" + "05") // pid 1009, start 5
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding\n got %x\nwant %x", got, want)
	}
	var back ProcessOwnershipCommitAck
	if err := postcard.Unmarshal(got, &back); err != nil || back != ack {
		t.Fatalf("decode = %+v, %v", back, err)
	}
	bad := bytes.Clone(got)
	bad[0] = 1
	if err := postcard.Unmarshal(bad, &back); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("unknown ack version: %v", err)
	}
	bad = bytes.Clone(got)
	bad[1+1+32+16+16] = 11 // slot index past the eleventh
	if err := postcard.Unmarshal(bad, &back); !errors.Is(err, postcard.ErrUnknownEnum) {
		t.Fatalf("unknown slot: %v", err)
	}
}

func TestOwnershipStep(t *testing.T) {
	a, b := testIdentity(1), testIdentity(2)
	un := PersistedHostProcessOwnership{}
	cases := []struct {
		name       string
		prev, next PersistedHostProcessOwnership
		direct     bool
		want       error
	}{
		{"unchanged unassigned", un, un, false, nil},
		{"stage", un, StagedOwnership(a), false, nil},
		{"commit staged", StagedOwnership(a), CommittedOwnership(a), false, nil},
		{"unchanged committed", CommittedOwnership(a), CommittedOwnership(a), false, nil},
		{"direct commit", un, CommittedOwnership(a), true, nil},
		{"acquired commit without staging", un, CommittedOwnership(a), false, ErrCommitNotStaged},
		{"commit other identity", StagedOwnership(a), CommittedOwnership(b), false, ErrCommitMismatch},
		{"restage other identity", StagedOwnership(a), StagedOwnership(b), false, ErrOwnershipRegressed},
		{"clear staged", StagedOwnership(a), un, false, ErrOwnershipRegressed},
		{"clear committed", CommittedOwnership(a), un, true, ErrOwnershipRegressed},
		{"uncommit", CommittedOwnership(a), StagedOwnership(a), false, ErrOwnershipRegressed},
		{"replace committed", CommittedOwnership(a), CommittedOwnership(b), true, ErrOwnershipRegressed},
		{"unassigned with identity", un, PersistedHostProcessOwnership{Identity: a}, false, ErrInvalidOwnership},
		{"staged without authority", un, StagedOwnership(PidfsProcessIdentityV1{HostPID: 3}), false, ErrInvalidOwnership},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOwnershipStep(c.prev, c.next, c.direct)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("= %v, want %v", err, c.want)
			}
		})
	}
}

func TestDirectSlots(t *testing.T) {
	direct := map[Slot]bool{SlotNetworkRuntimeSupervisor: true, SlotHelperRuntimeSupervisor: true, SlotSandboxHostCoordinator: true, SlotSessionTerminalHostCoordinator: true}
	n := 0
	for s := Slot(0); s < 20; s++ {
		if !s.Valid() {
			continue
		}
		n++
		if s.Direct() != direct[s] {
			t.Errorf("%v.Direct() = %v", s, s.Direct())
		}
	}
	if n != 11 {
		t.Fatalf("%d valid slots, want 11", n)
	}
}
