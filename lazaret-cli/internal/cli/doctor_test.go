package cli

import (
	"encoding/json"
	"os"
	"testing"
)

// The test binary doubles as lazaret-cli for the doctor's namespace
// probes, which re-execute the running executable as `doctor probe NAME`.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == "doctor" && os.Args[2] == "probe" {
		if err := App().Run(os.Args); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestDoctorRealRun runs every check on this host. Host-specific results
// are not asserted: the report must be well formed, and the exit status
// must agree with it.
func TestDoctorRealRun(t *testing.T) {
	newHost(t)
	stdout, stderr, err := runApp(t, "doctor", "--json")
	code := exitCode(err)
	if code != 0 && code != 1 {
		t.Fatalf("exit %d (%v), stderr %s", code, err, stderr)
	}
	var rep struct {
		RuntimeRoot string `json:"runtime_root"`
		StorageRoot string `json:"storage_root"`
		Checks      []struct {
			Name, Status, Summary, Fix string
		} `json:"checks"`
		Leftovers []struct {
			Kind, Status, Summary, Command string
		} `json:"leftovers"`
		OK bool `json:"ok"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	failed := false
	names := map[string]bool{}
	for _, c := range rep.Checks {
		names[c.Name] = true
		switch c.Status {
		case "ok":
		case "warn", "fail":
			if c.Fix == "" {
				t.Errorf("check %q is %s without a fix", c.Name, c.Status)
			}
			failed = failed || c.Status == "fail"
		default:
			t.Errorf("check %q has status %q", c.Name, c.Status)
		}
		if c.Summary == "" {
			t.Errorf("check %q has no summary", c.Name)
		}
	}
	for _, l := range rep.Leftovers {
		if l.Command == "" || l.Summary == "" {
			t.Errorf("leftover without command or summary: %+v", l)
		}
		failed = failed || l.Status == "fail"
	}
	for _, n := range []string{"kernel", "user namespaces", "overlayfs in a user namespace", "openat2", "pidfd and pidfs",
		"statx mount ID", "runsc", "subordinate IDs", "/dev/fuse", "/dev/net/tun", "nftables", "slirp4netns", "git",
		"runtime root", "storage root"} {
		if !names[n] {
			t.Errorf("no %q check in %v", n, names)
		}
	}
	if rep.OK == failed || (code == 0) != rep.OK {
		t.Errorf("ok=%v, a failure listed=%v, exit %d: they disagree", rep.OK, failed, code)
	}
	text, _, terr := runApp(t, "doctor")
	if (exitCode(terr) == 0) != rep.OK || len(text) == 0 {
		t.Errorf("text run: exit %d, %d bytes", exitCode(terr), len(text))
	}
}

func TestDoctorProbeRefusesUnknown(t *testing.T) {
	_, _, err := runApp(t, "doctor", "probe", "kvm")
	if err == nil {
		t.Fatal("unknown probe accepted")
	}
}
