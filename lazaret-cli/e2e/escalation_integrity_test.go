//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/loglimit"
	"lazaret.dev/pkg/testgate"
)

// hold keeps the sandbox's Domain published for d with a session running
// /bin/sleep, so that the sessions of a test come and go in one
// generation. It waits until the Domain is published and returns the
// published generation.
func (s *sandbox) hold(d time.Duration) string {
	s.t.Helper()
	args := s.sessionArgs("exec", "2s", "/bin/sleep", strconv.Itoa(int(d.Seconds())))
	cmd := exec.Command(filepath.Join(binDir(s.t), "lazaret-cli"), args...)
	cmd.Env = append(os.Environ(), s.env...)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		st := s.status()
		if len(st.Domains) == 1 && st.Domains[0].Published != nil {
			return st.Domains[0].Published.GenerationID
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the Domain was not published: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sameGeneration fails the test when the published generation is no
// longer gen: the sessions of the test must share one generation.
func (s *sandbox) sameGeneration(gen string) {
	s.t.Helper()
	st := s.status()
	if len(st.Domains) != 1 || st.Domains[0].Published == nil || st.Domains[0].Published.GenerationID != gen {
		s.t.Fatalf("the generation %s held for the test is gone: %+v", gen, st)
	}
}

// logLines returns the lines of the Domain's coordinator.log that contain
// every one of want.
func (s *sandbox) logLines(want ...string) []string {
	s.t.Helper()
	var out []string
next:
	for _, l := range strings.Split(s.domainLog(), "\n") {
		for _, w := range want {
			if !strings.Contains(l, w) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// TestEscalationEndedSessionCapabilityRefused: session A saves its
// LAZARET_SESSION_CAPABILITY and exits; session B then signs a request
// with it for a command an auto-approval rule admits. The capability
// ended with session A: the coordinator discards the request with a
// logged reason and runs nothing.
func TestEscalationEndedSessionCapabilityRefused(t *testing.T) {
	s := escalationSandbox(t)
	gen := s.hold(120 * time.Second)
	out, errOut, code := s.exec("/bin/sh", "-c", `echo "$LAZARET_SESSION_CAPABILITY" > /root/cap-a; echo saved`)
	if code != 0 || out != "saved\n" {
		t.Fatalf("session A: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	time.Sleep(time.Second)
	// The guest waits for an answer that never comes; timeout ends it.
	out, errOut, code = s.exec("/bin/sh", "-c",
		`LAZARET_SESSION_CAPABILITY=$(cat /root/cap-a) timeout 10 `+guestRun+` -- /usr/bin/echo approved; echo rc=$?`)
	t.Logf("session B with A's capability: code %d, stdout %q, stderr %q", code, out, errOut)
	s.sameGeneration(gen)
	if strings.Contains(out, "approved\n") {
		t.Errorf("a request under the ended session A ran on the host: stdout %q", out)
	}
	if ev := s.logLines("msg=escalation ", "phase=Executing"); len(ev) > 0 {
		t.Errorf("a request of an ended session was executed: %q", ev)
	}
	var discarded []string
	deadline := time.Now().Add(10 * time.Second)
	for len(discarded) == 0 && time.Now().Before(deadline) {
		discarded = s.logLines(`msg="discarding mailbox record"`, ".request.00000000", "session has ended")
		time.Sleep(200 * time.Millisecond)
	}
	if len(discarded) != 1 {
		t.Errorf("%d discard lines of a request naming the ended session, want 1", len(discarded))
	} else {
		t.Logf("discarded: %s", discarded[0][strings.Index(discarded[0], "reason="):])
	}
	// The live session's own capability still works.
	out, errOut, code = s.exec("/bin/sh", "-c", guestRun+` -- /usr/bin/echo approved; echo rc=$?`)
	if out != "approved\nrc=0\n" {
		t.Errorf("a live session's request: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestEscalationOutboxFloodBoundedLog floods the outbox from inside the
// sandbox with 3,000 directories named like requests and 3,000 junk
// files, and measures how much coordinator.log grows in the 15 s that
// follow: every entry is removed once and the lines it causes are rate
// limited, so the growth is bounded. A request sent after the flood is
// still answered.
func TestEscalationOutboxFloodBoundedLog(t *testing.T) {
	s := escalationSandbox(t)
	gen := s.hold(180 * time.Second)
	before := len(s.domainLog())
	start := time.Now()
	out, errOut, code := s.exec("/bin/sh", "-c", `cd /run/lazaret/mailbox/outbox || exit 1
i=0
while [ $i -lt 3000 ]; do
  mkdir "$(printf '%032x' $i).request.00000000"
  echo junk > "junk-$i"
  i=$((i+1))
done
echo flooded`)
	if code != 0 || !strings.HasSuffix(out, "flooded\n") {
		t.Fatalf("flooding the outbox: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	flooded := time.Since(start)
	time.Sleep(15 * time.Second)
	s.sameGeneration(gen)
	growth := len(s.domainLog()) - before
	t.Logf("coordinator.log grew %d bytes in %v (flood written in %v)", growth, time.Since(start).Round(time.Second), flooded.Round(time.Second))
	const limit = 256 << 10
	if growth > limit {
		t.Errorf("coordinator.log grew %d bytes, more than %d", growth, limit)
	}
	if sup := s.logLines("suppressed"); len(sup) == 0 {
		t.Errorf("no summary line of suppressed log lines")
	} else {
		t.Logf("summary: %s", sup[len(sup)-1])
	}
	out, errOut, code = s.exec("/bin/sh", "-c", `ls -A /run/lazaret/mailbox/outbox | wc -l; `+guestRun+` -- /usr/bin/echo approved; echo rc=$?`)
	if !strings.HasSuffix(out, "approved\nrc=0\n") {
		t.Errorf("a request after the flood: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if f := strings.Fields(out); len(f) == 0 || f[0] != "0" {
		t.Errorf("the outbox still holds entries after the flood: %q", out)
	}
}

// TestEscalationAuditFullDataRootFailsClosed puts the storage root on a
// small tmpfs, fills it from inside the sandbox through the persistent
// directory /root, and then sends a request an auto-approval rule
// admits: its audit record cannot be made durable, so it is refused, the
// guest says why, nothing runs on the host, and status shows it.
func TestEscalationAuditFullDataRootFailsClosed(t *testing.T) {
	// Mounting a small tmpfs as the storage root needs root.
	testgate.Opted(t)
	testgate.Root(t)
	s := escalationSandbox(t)
	data := filepath.Join(s.home, "data")
	saved := filepath.Join(s.home, "data.saved")
	if out, err := exec.Command("cp", "-a", data, saved).CombinedOutput(); err != nil {
		t.Fatalf("saving the storage root: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", data).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v\n%s", data, err, out)
	}
	// Registered after newSandbox's cleanup, so it runs before it: the
	// teardown finishes first, then the mount goes.
	t.Cleanup(func() {
		s.waitTeardown()
		if out, err := exec.Command("umount", "-l", data).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v\n%s", data, err, out)
		}
	})
	if out, err := exec.Command("cp", "-a", saved+"/.", data).CombinedOutput(); err != nil {
		t.Fatalf("restoring the storage root: %v\n%s", err, out)
	}
	gen := s.hold(180 * time.Second)
	out, errOut, code := s.exec("/bin/sh", "-c", `dd if=/dev/zero of=/root/fill bs=1M 2>&1 | tail -1; sync; df -k /root | tail -1`)
	t.Logf("filling /root: code %d, stdout %q, stderr %q", code, out, errOut)
	df, err := exec.Command("df", "-k", data).CombinedOutput()
	t.Logf("host: %s (%v)", df, err)
	out, errOut, code = s.exec("/bin/sh", "-c", guestRun+` -- /usr/bin/echo approved; echo rc=$?`)
	t.Logf("request on a full storage root: code %d, stdout %q, stderr %q", code, out, errOut)
	s.sameGeneration(gen)
	if strings.Contains(out, "approved\n") {
		t.Errorf("a request ran while its audit record could not be made durable: stdout %q", out)
	}
	if !strings.Contains(out, "rc=126") {
		t.Errorf("the guest did not exit 126 (Failed): stdout %q", out)
	}
	if !strings.Contains(errOut+out, "audit log") {
		t.Errorf("the guest was not told that the audit log refused the request: stdout %q, stderr %q", out, errOut)
	}
	if ev := s.logLines("msg=escalation ", "phase=Executing"); len(ev) > 0 {
		t.Errorf("a request was executed: %q", ev)
	}
	// The sandbox can repeat refused requests at will while the file
	// system stays full: the lines they cause go through the limiter
	// (loglimit.DefaultBurst at once, then one per interval).
	refusedBefore := len(s.logLines("refusing an escalation request"))
	out, errOut, code = s.exec("/bin/sh", "-c", `i=0; while [ $i -lt 40 ]; do `+guestRun+` -- /usr/bin/echo approved >/dev/null 2>&1; i=$((i+1)); done; echo done`)
	if out != "done\n" {
		t.Errorf("40 requests on a full storage root: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := len(s.logLines("refusing an escalation request")) - refusedBefore; n > 2*loglimit.DefaultBurst {
		t.Errorf("40 refused requests wrote %d refusal lines; the limiter allows %d at once", n, loglimit.DefaultBurst)
	} else {
		t.Logf("40 refused requests wrote %d refusal lines", n)
	}
	st, stErr, stCode := s.cli("status")
	t.Logf("status (code %d):\n%s%s", stCode, st, stErr)
	if !strings.Contains(st, "audit log") || !strings.Contains(st, "refusing") {
		t.Errorf("status does not show the audit log refusing requests:\n%s", st)
	}
	doc, docErr, docCode := s.cli("doctor")
	t.Logf("doctor (code %d):\n%s%s", docCode, doc, docErr)
	if !strings.Contains(doc, "audit log space") || !strings.Contains(doc, "refuses escalation requests") {
		t.Errorf("doctor does not report the audit log:\n%s%s", doc, docErr)
	}
	// Space freed again: the next request runs and is audited.
	if _, errOut, code := s.exec("/bin/rm", "/root/fill"); code != 0 {
		t.Fatalf("removing /root/fill: %s", errOut)
	}
	out, errOut, code = s.exec("/bin/sh", "-c", guestRun+` -- /usr/bin/echo approved; echo rc=$?`)
	if out != "approved\nrc=0\n" {
		t.Errorf("a request after space was freed: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}
