package coordinator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
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
// third, that each of those start reports name it as kept, and that after
// the developer releases it the next generation reads the host's copy.
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
			for _, n := range []string{"second", "third"} {
				out, report := generation(t, readEnv)
				if strings.Contains(out, e.secret) {
					t.Fatalf("%s generation reads the host's .env: %q", n, out)
				}
				if out != "SECRET=sandbox\n" {
					t.Errorf("%s generation's .env = %q, want the isolated copy", n, out)
				}
				if !hasKept(report, ".env") {
					t.Errorf("%s start report %q does not name .env as kept", n, report)
				}
			}
			if got := readFile(t, filepath.Join(e.workspace, ".env")); got != hostSecret {
				t.Errorf("host .env = %q, want it untouched", got)
			}

			released, err := releaseIsolated(e.storage, e.domain, []string{".env"})
			if err != nil {
				t.Fatalf("releasing .env: %v", err)
			}
			if len(released) != 1 || released[0] != ".env" {
				t.Errorf("released %q, want [.env]", released)
			}
			out, report := generation(t, readEnv)
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
		if l == "kept "+quoteReportPath(path) {
			return true
		}
	}
	return false
}

// releaseIsolated is what `lazaret-cli workspace release` does to the
// Domain Store of a stopped Domain.
func releaseIsolated(storage string, domain ids.DomainID, paths []string) ([]string, error) {
	st, err := domainstore.Open(storage, domain, domainstore.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []string
	err = st.Update(func(tx *domainstore.Tx) error {
		removed, err := tx.ReleaseIsolated(paths)
		for _, e := range removed {
			out = append(out, e.Path)
		}
		return err
	})
	return out, err
}
