package supervisor_test

import (
	"os/exec"
	"testing"
)

// BenchmarkLaunch compares launch-to-exit of /bin/true under the
// supervisor (socketpair, two barriers, gate re-exec) with a bare
// fork/exec of /bin/true.
func BenchmarkLaunch(b *testing.B) {
	requirePidfs(b)
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("supervised", func(b *testing.B) {
		b.ReportAllocs()
		spec := newSpec(b, "/bin/true")
		spec.Log = nil
		for b.Loop() {
			h := launch(b, spec, &recorder{})
			if _, err := h.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
