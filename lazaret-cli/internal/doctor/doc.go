// Package doctor checks whether a host can run Lazaret and finds the state
// that earlier generations left behind, for `lazaret-cli doctor`.
//
// What belongs here:
//
//   - pure check functions (checks.go): each takes facts already read from
//     the host (a kernel release string, a probe's error, the contents of
//     /etc/subuid, a file's mode) and returns one Check with its status,
//     one sentence, and for a failure what to do;
//   - pure leftover detection (leftover.go): Domain runtime directories
//     with a publication but no coordinator, Domain Stores whose
//     participants are not Clean, mounts under the runtime or storage
//     root, and Lazaret processes no coordinator owns, each with the exact
//     command that cleans it;
//   - the parsers those need (mountinfo, /proc/PID/cmdline and stat);
//   - gathering the facts from the live host (host_linux.go) and the
//     namespace probes that run in a child process (probe_linux.go).
//
// What does not: the command-line surface (internal/cli), the Domain status
// that `lazaret-cli status` prints (internal/session, which this package
// reads), and any repair. The doctor changes nothing on the host except
// for its probes, which create throw-away namespaces, a temporary directory
// and (with ProbeRunsc) a throw-away sandbox, and remove them again.
package doctor
