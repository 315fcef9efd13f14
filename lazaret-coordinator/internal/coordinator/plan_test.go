package coordinator

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/domainstore"
)

func TestStartOrder(t *testing.T) {
	cases := []struct {
		name string
		in   PlanInput
		want []Step
	}{
		{"bind view, no network", PlanInput{}, []Step{StepPrepare, StepAnchor, StepTrust, StepGitRouting, StepSandbox, StepPublish}},
		{"sidecar network", PlanInput{NetworkSidecar: true}, []Step{StepPrepare, StepAnchor, StepTrust, StepGitRouting, StepNetwork, StepSandbox, StepPublish}},
		{"gitroute daemon", PlanInput{GitRoutingDaemon: true, NetworkSidecar: true}, []Step{StepPrepare, StepAnchor, StepTrust, StepGitRouting, StepNetwork, StepSandbox, StepPublish}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := StartOrder(tc.in)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("StartOrder = %v, want %v", got, tc.want)
			}
			if err := CheckOrder(got); err != nil {
				t.Fatalf("CheckOrder: %v", err)
			}
		})
	}
}

func TestCheckOrderRefuses(t *testing.T) {
	cases := map[string][]Step{
		"empty":                 nil,
		"sandbox before anchor": {StepPrepare, StepSandbox, StepAnchor, StepTrust, StepPublish},
		"publish not last":      {StepPrepare, StepAnchor, StepTrust, StepPublish, StepSandbox},
		"repeated":              {StepPrepare, StepAnchor, StepAnchor, StepTrust, StepSandbox, StepPublish},
		"no trust anchor":       {StepPrepare, StepAnchor, StepSandbox, StepPublish},
		"unknown":               {StepPrepare, Step(99)},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			if err := CheckOrder(steps); err == nil {
				t.Fatalf("CheckOrder(%v) accepted", steps)
			}
		})
	}
}

func TestReleaseOrder(t *testing.T) {
	cases := []struct {
		name string
		done []Step
		want []Step
	}{
		{"full generation", StartOrder(PlanInput{NetworkSidecar: true}),
			[]Step{StepPublish, StepSandbox, StepNetwork, StepGitRouting, StepTrust, StepAnchor, StepPrepare}},
		{"failed in the sandbox step", []Step{StepPrepare, StepAnchor, StepTrust, StepGitRouting, StepSandbox},
			[]Step{StepSandbox, StepGitRouting, StepTrust, StepAnchor, StepPrepare}},
		{"failed preparing", []Step{StepPrepare}, []Step{StepPrepare}},
		{"nothing", nil, []Step{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReleaseOrder(tc.done)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
				t.Fatalf("ReleaseOrder = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := ReleaseOrder([]Step{StepAnchor, StepAnchor}); err == nil {
		t.Fatal("ReleaseOrder accepted a repeated step")
	}
}

func TestRunscCommandLines(t *testing.T) {
	r := Runsc{Path: "/opt/runsc", Root: "/run/x/gen/runsc", Platform: "systrap"}
	global := "/opt/runsc --root=/run/x/gen/runsc --platform=systrap --network=none --ignore-cgroups --host-uds=none --host-fifo=none --gofer-network-namespace=new --overlay2=none"
	cases := []struct {
		name string
		argv []string
		want string
	}{
		{"run", r.Run("/b", "c1"), global + " run --bundle=/b c1"},
		{"exec", r.Exec("c1", "/proc/self/fd/5", "/p/s.pid"), global + " exec --process=/proc/self/fd/5 --internal-pid-file=/p/s.pid c1"},
		{"kill container", r.Kill("c1", 0, "KILL"), global + " kill c1 KILL"},
		{"kill process", r.Kill("c1", 7, "KILL"), global + " kill --pid=7 c1 KILL"},
		{"delete", r.Delete("c1"), global + " delete --force c1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(tc.argv, " "); got != tc.want {
				t.Fatalf("argv\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if slices.Contains(r.Global(), "--rootless") {
		t.Fatal("--rootless must not be passed inside the State Anchor's user namespace")
	}
	r.Network = "sandbox"
	want := strings.Replace(global, "--network=none", "--network=sandbox", 1) + " run --bundle=/b c1"
	if got := strings.Join(r.Run("/b", "c1"), " "); got != want {
		t.Fatalf("argv with the sidecar's network\n got %s\nwant %s", got, want)
	}
}

func TestChoosePlatform(t *testing.T) {
	const full = "kill_process kill_thread trap errno user_notif trace log allow\n"
	const noTrap = "kill_process kill_thread errno log allow\n"
	cases := []struct{ value, actions, want string }{
		{"", full, "systrap"},
		{"", noTrap, "ptrace"},
		{"", "", "ptrace"},
		{"systrap", noTrap, "systrap"}, // an explicit choice is kept
		{"ptrace", full, "ptrace"},
		{"kvm", full, "kvm"},
	}
	for _, tc := range cases {
		if got, err := ChoosePlatform(tc.value, tc.actions); err != nil || got != tc.want {
			t.Errorf("ChoosePlatform(%q, %q) = %q, %v; want %q", tc.value, tc.actions, got, err, tc.want)
		}
	}
	if _, err := ChoosePlatform("gpu", full); !errors.Is(err, ErrRunsc) {
		t.Errorf("ChoosePlatform(gpu) error = %v", err)
	}
}

func TestLocateRunscOverride(t *testing.T) {
	cases := map[string]string{"relative": "bin/runsc", "missing": "/nonexistent/runsc", "directory": "/tmp"}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LocateRunsc(func(k string) (string, bool) { return v, k == EnvRunsc }, nil)
			if !errors.Is(err, ErrRunsc) || !strings.Contains(err.Error(), EnvRunsc) {
				t.Fatalf("error = %v", err)
			}
		})
	}
}

func TestIdleDeadline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name   string
		linger time.Duration
		ever   bool
		want   time.Duration
	}{
		{"after a command, linger 0", 0, true, 0},
		{"after a command", 10 * time.Second, true, 10 * time.Second},
		{"before any command, short linger waits the join window", 0, false, joinWindow},
		{"before any command, long linger", time.Minute, false, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := idleDeadline(t0, tc.linger, tc.ever).Sub(t0); got != tc.want {
				t.Fatalf("deadline after %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("a\nb\r\tc \x7f"); got != "a b  c" {
		t.Fatalf("oneLine = %q", got)
	}
}

// A slow start-up must not eat the join window: the idle clock restarts
// at publication.
func TestIdleClockRestartsAtPublication(t *testing.T) {
	s := &sessions{idleSince: time.Now().Add(-time.Hour)}
	s.published()
	since, idle, ever := s.idle()
	if !idle || ever {
		t.Fatalf("idle=%v ever=%v for a fresh generation", idle, ever)
	}
	if d := time.Until(idleDeadline(since, 0, ever)); d < joinWindow-time.Second {
		t.Fatalf("a generation published now ends in %v; want about the %v join window", d, joinWindow)
	}
}

func TestRecoveryOrder(t *testing.T) {
	want := []domainstore.Role{
		domainstore.RolePublication, domainstore.RoleSandbox, domainstore.RoleHelper, domainstore.RoleNetwork,
		domainstore.RoleGitRouting, domainstore.RoleStateAnchor, domainstore.RolePreparedLower,
	}
	if got := RecoveryOrder(); !slices.Equal(got, want) {
		t.Fatalf("RecoveryOrder() = %v, want %v", got, want)
	}
	for _, r := range want {
		if recoverers[r] == nil {
			t.Errorf("no recoverer for role %v", r)
		}
	}
}

// Every step needs only steps that come before it in the start order, so
// the overlapping start can always proceed, and the model's enabling
// conditions are among the needs.
func TestNeeds(t *testing.T) {
	for _, in := range []PlanInput{{}, {NetworkSidecar: true}, {GitRoutingDaemon: true, NetworkSidecar: true}} {
		order := StartOrder(in)
		for i, st := range order {
			for _, n := range Needs(st, order) {
				if j := slices.Index(order, n); j < 0 || j >= i {
					t.Errorf("%+v: %v needs %v, which does not come before it", in, st, n)
				}
			}
		}
	}
	full := StartOrder(PlanInput{NetworkSidecar: true})
	model := map[Step][]Step{
		// StartSidecar: the State Anchor mounted, the trust anchor created.
		StepNetwork: {StepAnchor, StepTrust},
		// StartRuntimeSupervisor: the sidecar Ready.
		StepSandbox: {StepNetwork},
		// PublishDomain: the sandbox Ready, the trust anchor created.
		StepPublish: {StepSandbox, StepTrust},
	}
	for st, want := range model {
		for _, n := range want {
			if !slices.Contains(Needs(st, full), n) {
				t.Errorf("%v does not wait for %v, which the model requires", st, n)
			}
		}
	}
	if got := Needs(StepSandbox, StartOrder(PlanInput{})); slices.Contains(got, StepNetwork) {
		t.Errorf("without a sidecar the sandbox still waits for the network: %v", got)
	}
}
