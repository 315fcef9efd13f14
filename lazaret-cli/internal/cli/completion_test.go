package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// completionScript returns `lazaret-cli completion SHELL`, written to a
// file.
func completionScript(t *testing.T, shell string) (path, text string) {
	t.Helper()
	stdout, stderr, err := runApp(t, "completion", shell)
	if err != nil || stderr != "" || stdout == "" {
		t.Fatalf("completion %s: %v, stderr %q, %d bytes", shell, err, stderr, len(stdout))
	}
	path = filepath.Join(t.TempDir(), "completion."+shell)
	if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, stdout
}

func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script, _ := completionScript(t, "bash")
	// complete asks the function for the words after the typed ones, as
	// bash does on TAB.
	prog := `source "$1" && complete -p lazaret-cli || exit 1
complete_words() {
	COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
	_lazaret_cli
	echo "${COMPREPLY[*]}"
}
complete_words lazaret-cli im
complete_words lazaret-cli image l
complete_words lazaret-cli --profile image st
complete_words lazaret-cli image list --st
complete_words lazaret-cli workspace review --
complete_words lazaret-cli completion
`
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := []string{
		"complete -o default -F _lazaret_cli lazaret-cli",
		"image",
		"load ls list",
		// --profile takes a value, so "image" is its value, not the command.
		"store start status stop",
		"--storage-root",
		"--profile --workspace --config --accept --help",
		// The completion command itself is hidden.
		"",
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("bash completion\n got %q\nwant %q", got, want)
	}
}

func TestCompletionZshFish(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			script, text := completionScript(t, shell)
			for _, c := range App().VisibleCommands() {
				if !strings.Contains(text, c.Name) {
					t.Errorf("%s script does not mention %s", shell, c.Name)
				}
			}
			storageRoot := "--storage-root"
			if shell == "fish" {
				storageRoot = "-l storage-root"
			}
			for _, w := range []string{"build-dir", storageRoot, "isolated"} {
				if !strings.Contains(text, w) {
					t.Errorf("%s script does not mention %s", shell, w)
				}
			}
			if strings.Contains(text, "'completion'") {
				t.Errorf("fish script offers the hidden completion command")
			}
			if shell == "zsh" && !strings.HasPrefix(text, "#compdef lazaret-cli\n") {
				t.Errorf("zsh script does not begin with #compdef")
			}
			bin, err := exec.LookPath(shell)
			if err != nil {
				t.Logf("%s is not installed: the script's syntax is not checked", shell)
				return
			}
			if out, err := exec.Command(bin, "-n", script).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

func TestCompletionUnknownShell(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		stdout, stderr, err := runApp(t, args...)
		if exitCode(err) != 1 || stdout != "" || !strings.Contains(stderr, "bash, zsh, fish") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, exitCode(err), stdout, stderr)
		}
	}
}
