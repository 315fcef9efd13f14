//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEscalationCoordinatorKilledKeepsAudit kills the Host Coordinator
// (SIGKILL) twice: once while it lingers after a request, whose terminal
// record is then written but not yet durable (the audit log fsyncs only
// at the durable points), and once while an auto-approved host command
// runs for the guest. A record written is never lost with its
// coordinator: after each recovery the next generation continues the
// audit log's chain after every record the killed one wrote, and
// `lazaret-cli log` reads it whole, each request with the records it
// reached. The host command dies with its coordinator.
func TestEscalationCoordinatorKilledKeepsAudit(t *testing.T) {
	s := escalationSandbox(t)
	guest := func(argv ...string) (string, string, int) {
		t.Helper()
		return s.cli(append([]string{"exec", "--profile", "dev", "--workspace", s.workspace, "--config", s.config,
			"--linger", "60s", "--", "/run/lazaret/lazaret-guest", "run", "--"}, argv...)...)
	}
	kill := func() {
		t.Helper()
		pid, ok := s.victimPID("lazaret-coordinator")
		if !ok {
			t.Fatal("no coordinator of the Domain")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if out, errOut, code := guest("/usr/bin/echo", "approved"); code != 0 || out != "approved\n" {
		t.Fatalf("the first request: code %d stdout %q stderr %q", code, out, errOut)
	}
	kill()
	done := make(chan int, 1)
	go func() {
		_, _, code := guest("/usr/bin/sleep", "32.5")
		done <- code
	}()
	waitHostProcess(t, true, 90*time.Second, "/usr/bin/sleep", "32.5")
	kill()
	waitHostProcess(t, false, 30*time.Second, "/usr/bin/sleep", "32.5")
	select {
	case code := <-done:
		if code == 0 {
			t.Errorf("the interrupted request's exec exited 0")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the interrupted request's exec did not end after its coordinator was killed")
	}
	if out, errOut, code := guest("/usr/bin/echo", "approved"); code != 0 || out != "approved\n" {
		t.Fatalf("the request after recovery: code %d stdout %q stderr %q", code, out, errOut)
	}
	if _, errOut, code := s.cli("stop", "--profile", "dev", "--workspace", s.workspace, "--config", s.config); code != 0 {
		t.Fatalf("stop: code %d: %s", code, errOut)
	}

	out, errOut, code := s.cli("log", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--json")
	if code != 0 {
		t.Fatalf("log --json after the kill: code %d: %s", code, errOut)
	}
	var records []struct {
		Request string   `json:"request"`
		Phase   string   `json:"phase"`
		Argv    []string `json:"argv"`
	}
	if err := json.Unmarshal([]byte(out), &records); err != nil {
		t.Fatalf("log --json printed %q: %v", out, err)
	}
	var order []string
	phases := map[string][]string{}
	argv := map[string]string{}
	for _, r := range records {
		if _, seen := phases[r.Request]; !seen {
			order = append(order, r.Request)
		}
		phases[r.Request] = append(phases[r.Request], r.Phase)
		argv[r.Request] = strings.Join(r.Argv, " ")
	}
	var got []string
	for _, id := range order {
		got = append(got, fmt.Sprintf("%s: %s", argv[id], strings.Join(phases[id], " ")))
	}
	want := []string{
		"/usr/bin/echo approved: Verified Approved Executing CompletionPending Completed",
		"/usr/bin/sleep 32.5: Verified Approved Executing",
		"/usr/bin/echo approved: Verified Approved Executing CompletionPending Completed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log after the kill:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
