//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletionLoadsFromBinary loads the built binary's bash completion
// the way the documentation says to, and completes a subcommand with it.
func TestCompletionLoadsFromBinary(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	prog := `source <("$1" completion bash) && complete -p lazaret-cli &&
COMP_WORDS=(lazaret-cli wor) COMP_CWORD=1 && _lazaret_cli && echo "${COMPREPLY[*]}"`
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", filepath.Join(binDir(t), "lazaret-cli")).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if want := "complete -o default -F _lazaret_cli lazaret-cli\nworkspace\n"; string(out) != want {
		t.Fatalf("bash printed %q, want %q", out, want)
	}
	for _, shell := range []string{"zsh", "fish"} {
		stdout, stderr, code := run(t, nil, "lazaret-cli", "completion", shell)
		if code != 0 || !strings.Contains(stdout, "workspace") {
			t.Errorf("completion %s: code %d, %d bytes, stderr %q", shell, code, len(stdout), stderr)
		}
	}
}
