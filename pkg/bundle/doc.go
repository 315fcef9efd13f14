// Package bundle plans the OCI runtime specification of a Lazaret sandbox:
// the container that `runsc run` starts for a generation, and the process
// specification of every session that `runsc exec` starts inside it.
//
// It is a pure planner: it takes the image configuration, the resolved
// profile's mounts and the product layout, and returns runtime-spec values.
// It opens no file and starts nothing; the Host Coordinator writes the
// container spec into the bundle directory and hands session process specs
// to runsc through an inherited descriptor.
//
// Two rules shape the plan:
//
//   - Secrets never reach disk. The container's own process is the guest's
//     init (it reaps and waits) and gets only the image environment; the
//     profile's resolved env: values go only into session process specs,
//     which are passed to `runsc exec --process` through a sealed memfd, never
//     written to a file.
//   - Every destination is accounted for. Each mount destination is either a
//     protected destination of SandboxLayoutV1 (mounted by the product) or a
//     configured volume path; Plan refuses anything else, so a planner change
//     cannot add an unreviewed mount.
package bundle
