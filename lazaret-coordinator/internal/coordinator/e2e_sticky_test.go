package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stickyAttacks are the ways a sandbox can try to make the next
// generation route a host-ignored path to the host: each leaves the host's
// .env a tracked or unignored path at the next start.
var stickyAttacks = []struct {
	name  string
	argvs [][]string
}{
	{"add -f, commit, skip-worktree", [][]string{
		sandboxGit("add", "-f", ".env"),
		sandboxGit("commit", "-q", "-m", "x"),
		sandboxGit("update-index", "--skip-worktree", ".env"),
	}},
	{"add -f alone", [][]string{
		sandboxGit("add", "-f", ".env"),
	}},
	{"add -f, commit, assume-unchanged", [][]string{
		sandboxGit("add", "-f", ".env"),
		sandboxGit("commit", "-q", "-m", "x"),
		sandboxGit("update-index", "--assume-unchanged", ".env"),
	}},
	{"remove the pattern from the tracked .gitignore", [][]string{
		{"/bin/sh", "-c", "printf 'build/\\n' > /workspace/.gitignore"},
	}},
}

// TestServeEndToEndStickyIsolation runs each attack in a first generation
// and checks that the host's .env stays unreadable in the second and
// third (started through lazaret-cli exec), that each start names it as
// kept, and that after the developer releases it with lazaret-cli
// workspace release the next generation reads the host's copy.
func TestServeEndToEndStickyIsolation(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	for _, attack := range stickyAttacks {
		t.Run(attack.name, func(t *testing.T) {
			e := newEnv(t)
			e.withGitImage(t)
			e.gitWorkspace(t)
			hostSecret := "SECRET=" + e.secret + "-dotenv\n"
			e.writeHostFiles(t, map[string]string{".env": hostSecret})

			// generation runs argvs in a fresh generation and returns
			// the standard output of the last one and the start report.
			generation := func(t *testing.T, argvs ...[]string) (string, []string) {
				t.Helper()
				h := e.start(t, time.Second)
				c, session := e.client(t)
				var last string
				for _, argv := range argvs {
					out, errs, x := execute(t, c, session(), argv...)
					if code(x) != 0 {
						t.Fatalf("%q: stdout %q stderr %q exit %+v", argv, out, errs, x)
					}
					last = out
				}
				c.Close()
				waitExit(t, e, h)
				return last, h.report
			}
			readEnv := []string{"/bin/sh", "-c", "cat /workspace/.env 2>&1 || true"}

			first := append([][]string{{"/bin/sh", "-c", "echo SECRET=sandbox > /workspace/.env"}}, attack.argvs...)
			if _, report := generation(t, first...); hasKept(report, ".env") {
				t.Errorf("first start report %q names .env as kept; nothing had changed yet", report)
			}
			out, report := generation(t, readEnv)
			if strings.Contains(out, e.secret) {
				t.Fatalf("second generation reads the host's .env: %q", out)
			}
			if out != "SECRET=sandbox\n" {
				t.Errorf("second generation's .env = %q, want the isolated copy", out)
			}
			if !hasKept(report, ".env") {
				t.Errorf("second start report %q does not name .env as kept", report)
			}
			// The third generation through the CLI, which names the kept
			// path on stderr.
			cliOut, cliErr, rc := e.cli(t, "exec", "--linger", "0", "--", "/bin/sh", "-c", "cat /workspace/.env 2>&1 || true")
			e.waitStopped(t)
			t.Logf("lazaret-cli exec stderr:\n%s", cliErr)
			if rc != 0 || strings.Contains(cliOut, e.secret) || cliOut != "SECRET=sandbox\n" {
				t.Errorf("third generation: exit %d, .env = %q, want the isolated copy", rc, cliOut)
			}
			if !strings.Contains(cliErr, "kept isolated from the sandbox") || !strings.Contains(cliErr, "\n  .env\n") ||
				!strings.Contains(cliErr, "lazaret-cli workspace release --profile "+testProfile+" PATH") {
				t.Errorf("lazaret-cli exec stderr does not name .env as kept with the release command:\n%s", cliErr)
			}
			if got := readFile(t, filepath.Join(e.workspace, ".env")); got != hostSecret {
				t.Errorf("host .env = %q, want it untouched", got)
			}

			listed, _, rc := e.cli(t, "workspace", "isolated")
			t.Logf("lazaret-cli workspace isolated:\n%s", listed)
			if rc != 0 || !strings.Contains(listed, "\n  .env\n") || !strings.Contains(listed, "\n  build/\n") {
				t.Errorf("workspace isolated (exit %d) = %q, want .env and build/", rc, listed)
			}
			_, unknown, rc := e.cli(t, "workspace", "release", "nope")
			t.Logf("lazaret-cli workspace release nope: %s", unknown)
			if rc == 0 || !strings.Contains(unknown, `"nope": not kept isolated`) {
				t.Errorf("releasing an unknown path: exit %d, stderr %q", rc, unknown)
			}
			released, _, rc := e.cli(t, "workspace", "release", ".env")
			t.Logf("lazaret-cli workspace release .env: %s", released)
			if rc != 0 || !strings.HasPrefix(released, "released .env: ") {
				t.Errorf("workspace release .env: exit %d, stdout %q", rc, released)
			}
			if listed, _, _ := e.cli(t, "workspace", "isolated"); strings.Contains(listed, "  .env\n") {
				t.Errorf("after the release, workspace isolated = %q", listed)
			}
			out, report = generation(t, readEnv)
			if out != hostSecret {
				t.Errorf("after the release .env = %q, want the host's copy", out)
			}
			if hasKept(report, ".env") {
				t.Errorf("start report after the release %q still names .env as kept", report)
			}
			checkNothingLeft(t, e)
			if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
				t.Log(e.log(t))
			}
		})
	}
}

// hasKept reports whether a start report names path as kept isolated.
func hasKept(report []string, path string) bool {
	for _, l := range report {
		if l == "kept "+strconv.QuoteToASCII(path) {
			return true
		}
	}
	return false
}

// cli runs the lazaret-cli of this tree on the test's Domain and returns
// its standard output, standard error and exit code.
func (e *env) cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	builtCLI.once.Do(func() {
		dir, err := os.MkdirTemp("", "lazaret-cli-")
		if err != nil {
			builtCLI.err = err
			return
		}
		builtCLI.path = filepath.Join(dir, "lazaret-cli")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtCLI.path, ".")
		cmd.Dir = filepath.Join(repoRoot(t), "lazaret-cli")
		if out, err := cmd.CombinedOutput(); err != nil {
			builtCLI.err = fmt.Errorf("building lazaret-cli: %v\n%s", err, out)
		}
	})
	if builtCLI.err != nil {
		t.Fatal(builtCLI.err)
	}
	// The subcommand's own flags come after its name.
	n := 1
	if args[0] == "workspace" {
		n = 2
	}
	argv := append(append([]string{}, args[:n]...), "--profile", testProfile, "--workspace", e.workspace, "--config", e.cfgFile)
	argv = append(argv, args[n:]...)
	cmd := exec.Command(builtCLI.path, argv...)
	cmd.Env = e.environ
	cmd.Dir = e.workspace
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("lazaret-cli %q: %v", argv, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

var builtCLI struct {
	once sync.Once
	path string
	err  error
}

// waitStopped waits until no coordinator holds the Domain lock.
func (e *env) waitStopped(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		f, err := os.OpenFile(filepath.Join(e.paths.Dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		f.Close()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Domain lock is still held\n%s", e.log(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
