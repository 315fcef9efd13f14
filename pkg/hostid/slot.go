package hostid

import "fmt"

// Slot is HostProcessOwnershipSlot: the exact edge a process is owned
// through. The zero value is invalid.
type Slot uint8

// The eleven ownership slots, in schema order.
const (
	SlotSandboxHostCoordinator Slot = iota + 1
	SlotSandboxRuntimeSupervisor
	SlotSandboxAttachedRunsc
	SlotStateAnchorDaemon
	SlotGitRoutingDaemon
	SlotNetworkRuntimeSupervisor
	SlotHelperConnectivityHelper
	SlotHelperRuntimeSupervisor
	SlotSessionTerminalHostCoordinator
	SlotSessionTerminalExecClient
	SlotEscalationHostProcess
)

var slotNames = [...]string{
	"",
	"SandboxHostCoordinator",
	"SandboxRuntimeSupervisor",
	"SandboxAttachedRunsc",
	"StateAnchorDaemon",
	"GitRoutingDaemon",
	"NetworkRuntimeSupervisor",
	"HelperConnectivityHelper",
	"HelperRuntimeSupervisor",
	"SessionTerminalHostCoordinator",
	"SessionTerminalExecClient",
	"EscalationHostProcess",
}

// slotCount is the number of valid slots.
const slotCount = len(slotNames) - 1

func (s Slot) String() string {
	if s.Valid() {
		return slotNames[s]
	}
	return fmt.Sprintf("invalid(%d)", uint8(s))
}

// Valid reports whether s is one of the eleven slots.
func (s Slot) Valid() bool { return s >= 1 && int(s) <= slotCount }

// Direct reports whether the slot is a direct existing-process edge: the
// owner or supervisor already exists and is committed when the dependent
// snapshot is created, so it may be recorded Committed without staging.
// Every other slot is an acquired child edge and must be staged first.
func (s Slot) Direct() bool {
	switch s {
	case SlotNetworkRuntimeSupervisor, SlotHelperRuntimeSupervisor,
		SlotSandboxHostCoordinator, SlotSessionTerminalHostCoordinator:
		return true
	}
	return false
}
