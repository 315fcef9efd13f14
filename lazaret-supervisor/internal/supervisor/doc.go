// Package supervisor is the Runtime Supervisor: it holds one attached
// child under the causal edge of the lifecycle model and reports the
// child's pidfs identity through the staged/committed ownership barrier.
//
// What belongs here: the supervisor's state machine over the generation
// channel (run.go), launching, watching, signalling and reaping the child
// (child.go), and the gate, the re-executed supervisor that holds the child
// until its ownership is committed and then becomes the real program by
// execve (gate.go).
//
// What does not: the message set and the coordinator's client are package
// lazaret.dev/pkg/supervise; what the child is (runsc and its bundle) is
// decided by the coordinator. docs/SUPERVISOR.md describes the protocol and
// every failure.
package supervisor
