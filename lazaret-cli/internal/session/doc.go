// Package session is the CLI side of a Domain's life: it finds or starts the
// Domain's Host Coordinator and runs the developer's sessions on it.
//
// What belongs here:
//
//   - the Domain lock (a flock on <runtime root>/domains/<id>/lock) and the
//     decision to spawn a coordinator, wait for one, or join a published one
//     (Attach, with the pure planner decide);
//   - spawning lazaret-coordinator detached with the lock (fd 3) and the
//     write end of the start report (fd 4), and reading that report;
//   - enrolling, registering a session with a fresh session anchor key, and
//     the exit code a session's end maps to;
//   - the developer's terminal: raw mode restored on every exit path, and
//     the interactive pump between the terminal and the control channel;
//   - the escalation prompt: the terminal input parser (KeyParser) that
//     tells keys from sequences and terminal replies, the prompt's input
//     (PromptInput: flushed when drawn, with the session's prompt mark)
//     and the menu whose choice is a letter confirmed by Enter;
//   - the read-only Domain status shown by `lazaret-cli status`;
//   - stopping a Domain's generation (Stopper): finding the coordinator
//     that holds the lock, pinning it with a pidfd and sending it SIGTERM.
//
// What does not: the control channel's wire format and TLS (pkg/control),
// the records (pkg/protocol, pkg/domainstore), configuration resolution
// (pkg/config) and the command-line surface (internal/cli).
//
// docs/OPERATIONS.md describes the behaviour for users: progress, waiting,
// fingerprint mismatches, exit codes and status.
package session
