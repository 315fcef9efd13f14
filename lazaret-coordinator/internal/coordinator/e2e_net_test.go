package coordinator

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/nftplan"
	"lazaret.dev/pkg/testgate"
	"lazaret.dev/pkg/testproc"
)

// enterInternet runs the calling top-level test where the test internet
// of netlab is routed (netlab.EnterInternet). The profile of newEnv allows
// 198.51.100.0/24 except 198.51.100.64/26, in which it allows 198.51.100.70
// again; it names 198.51.100.1:443 as permitted, 198.19.0.1:443 as denied
// and 198.51.100.53 as its resolver.
func enterInternet(t *testing.T) bool {
	t.Helper()
	testgate.Command(t, "slirp4netns")
	if !netlab.Provided() && !netlab.Inside() && os.Geteuid() == 0 {
		// Built once here, before the lab re-executes this test.
		buildHelpers(t)
	}
	return netlab.EnterInternet(t)
}

func TestServeEndToEndNetwork(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	h := e.start(t, time.Second)
	t.Logf("start report %q, start to ready %v", h.report, h.ready)
	c, session := e.client(t)
	cases := []struct {
		name, dst string
		reach     bool
	}{
		{"permitted host", netlab.InternetPermitted.String(), true},
		{"allowed by a longer prefix inside a denied one", netlab.InternetCarveOut.String(), true},
		{"denied prefix", netlab.InternetDenied.String(), false},
		{"denied /26 inside an allowed /24", netlab.InternetShadowed.String(), false},
		{"host's own address", netlab.HostLinkAddress.Addr().String(), false},
		{"host's loopback through the helper", "10.0.2.2", false},
		{"metadata address", "169.254.169.254", false},
		{"IPv6", "2001:db8::1", false},
		{"IPv6 loopback of the host through the helper", "fd00::2", false},
	}
	for _, a := range netlab.InternetPrivate {
		cases = append(cases, struct {
			name, dst string
			reach     bool
		}{"RFC 1918 " + a.String(), a.String(), false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, x := execute(t, c, session(), "nc", "-w", "1", tc.dst, "443")
			got := code(x) == 0 && strings.HasPrefix(out, "hello from")
			if got != tc.reach {
				t.Fatalf("nc -w 1 %s 443: stdout %q stderr %q exit %+v; want reachable=%v", tc.dst, out, errs, x, tc.reach)
			}
		})
	}
	t.Run("DNS through the listed resolver", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "nslookup", "example.com")
		if code(x) != 0 || !strings.Contains(out, netlab.InternetAnswer.String()) {
			t.Fatalf("nslookup: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})
	t.Run("DNS through another resolver", func(t *testing.T) {
		other := netlab.InternetOtherResolver
		out, errs, x := execute(t, c, session(), "timeout", "5", "nslookup", "example.com", other.String())
		if code(x) == 0 && strings.Contains(out, netlab.InternetAnswer.String()) {
			t.Fatalf("nslookup through %v answered: stdout %q stderr %q", other, out, errs)
		}
	})
	t.Run("probe rules removed before ready", func(t *testing.T) {
		// The sidecar proved the denied target by its deny rule's counter
		// and, before Ready, deleted the probe rules: the ruleset in its
		// namespace is exactly the plan of the recorded policy.
		if !strings.Contains(e.log(t), "refused_by_deny_rule=1") {
			t.Errorf("the log shows no denied target refused by its deny rule\n%s", e.log(t))
		}
		testgate.Root(t) // entering the sidecar's network namespace
		pol, _, err := control.ReadNetworkPolicy(e.paths.Dir)
		if err != nil {
			t.Fatal(err)
		}
		hosts, err := hostAddresses()
		if err != nil {
			t.Fatal(err)
		}
		plan, err := nftplan.New(pol, nftplan.Config{SandboxInterface: netpath.DefaultSandboxInterface,
			UpstreamInterface: netpath.SlirpTap, HostAddresses: hosts,
			RelayFrom: netpath.Config{}.WithDefaults().SandboxAddress(), RelayTo: netpath.Config{}.WithDefaults().Gateway()})
		if err != nil {
			t.Fatal(err)
		}
		enf, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", sidecarPID(t, e)))
		if err != nil {
			t.Fatal(err)
		}
		defer enf.Close()
		if err := netpath.VerifyRuleset(enf, plan); err != nil {
			t.Fatalf("the sidecar's ruleset while the generation runs: %v", err)
		}
	})
	t.Run("sidecar killed fails the generation", func(t *testing.T) {
		pid := sidecarPID(t, e)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-h.done:
			if h.err == nil {
				t.Fatalf("coordinator exited 0 after its network sidecar was killed\n%s", e.log(t))
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("coordinator still runs after its network sidecar was killed\n%s", e.log(t))
		}
		if !strings.Contains(e.log(t), "network sidecar ended") {
			t.Fatalf("the log does not say the network sidecar ended\n%s", e.log(t))
		}
	})
	checkNothingLeft(t, e)
}

func TestServeEndToEndHelperKilled(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	h := e.start(t, time.Minute)
	hc := h.cmd.Process.Pid
	helper := 0
	for _, p := range testproc.List() {
		if p.PPID == hc && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == "slirp4netns" {
			helper = p.PID
		}
	}
	if helper == 0 {
		t.Fatalf("no slirp4netns is a child of the coordinator %d", hc)
	}
	if err := syscall.Kill(helper, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.done:
		if h.err == nil {
			t.Fatalf("coordinator exited 0 after its connectivity helper was killed\n%s", e.log(t))
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("coordinator still runs after its connectivity helper was killed\n%s", e.log(t))
	}
	if !strings.Contains(e.log(t), "connectivity helper ended") {
		t.Fatalf("the log does not say the connectivity helper ended\n%s", e.log(t))
	}
	checkNothingLeft(t, e)
}

// sidecarPID is the PID of the test's lazaret-netsidecar.
func sidecarPID(t *testing.T, e *env) int {
	t.Helper()
	want := filepath.Join(e.bin, "lazaret-netsidecar")
	for _, p := range testproc.List() {
		if len(p.Argv) > 0 && p.Argv[0] == want {
			return p.PID
		}
	}
	t.Fatalf("no %s runs", want)
	return 0
}

func TestServeEndToEndNetworkReadinessFails(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	// 198.51.100.37 is allowed by the profile, but no host answers there.
	b, err := os.ReadFile(e.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), `permitted = [{ address = "198.51.100.1", port = 443 }]`,
		`permitted = [{ address = "198.51.100.1", port = 443 }, { address = "198.51.100.37", port = 443 }]`, 1)
	if err := os.WriteFile(e.cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.resolve(t)
	cmd, lock, rr := e.spawn(t, time.Second)
	var report []string
	sc := bufio.NewScanner(rr)
	for sc.Scan() {
		report = append(report, sc.Text())
	}
	rr.Close()
	err = cmd.Wait()
	lock.Close()
	if err == nil {
		t.Fatalf("coordinator exited 0 (report %q)", report)
	}
	last := ""
	if len(report) > 0 {
		last = report[len(report)-1]
	}
	if !strings.HasPrefix(last, "error ") || !strings.Contains(last, "198.51.100.37:443") || strings.Contains(strings.Join(report, "\n"), "ready") {
		t.Fatalf("start report %q; want an error naming 198.51.100.37:443 and no ready\n%s", report, e.log(t))
	}
	t.Logf("start report %q", report)
	checkNothingLeft(t, e)
}
