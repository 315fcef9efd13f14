package doctor

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/locate"
)

func TestParseKernelRelease(t *testing.T) {
	tests := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v1045", 6, 18, true},
		{"6.9", 6, 9, true},
		{"5.15.0-91-generic", 5, 15, true},
		{"6.10rc1", 6, 10, true},
		{"six.one", 0, 0, false},
		{"6", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			maj, min, err := ParseKernelRelease(tt.in)
			if (err == nil) != tt.ok || maj != tt.major || min != tt.minor {
				t.Fatalf("got %d.%d, %v", maj, min, err)
			}
			if !tt.ok && !errors.Is(err, ErrKernelRelease) {
				t.Fatalf("error %v is not ErrKernelRelease", err)
			}
		})
	}
}

func FuzzParseKernelRelease(f *testing.F) {
	f.Add("6.18.44-fc-v1045")
	f.Add("x.y")
	f.Fuzz(func(t *testing.T, s string) {
		if maj, min, err := ParseKernelRelease(s); err == nil && (maj < 0 || min < 0) {
			t.Fatalf("%q: %d.%d", s, maj, min)
		}
	})
}

func TestCheckKernel(t *testing.T) {
	for _, tt := range []struct {
		release string
		want    Status
	}{
		{"6.18.44", OK}, {"6.9.0", OK}, {"7.0", OK}, {"6.8.12", Fail}, {"5.19", Fail}, {"weird", Warn},
	} {
		t.Run(tt.release, func(t *testing.T) {
			if c := CheckKernel(tt.release); c.Status != tt.want || (c.Status != OK && c.Fix == "") {
				t.Fatalf("%+v, want %v with a fix unless ok", c, tt.want)
			}
		})
	}
}

func TestCheckUserNamespaceSysctls(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]string
		want   Status
	}{
		{"none", map[string]string{}, OK},
		{"mainline", map[string]string{SysctlMaxUserNS: "96362"}, OK},
		{"debian allows", map[string]string{SysctlUnprivilegedClone: "1", SysctlMaxUserNS: "10"}, OK},
		{"debian forbids", map[string]string{SysctlUnprivilegedClone: "0"}, Fail},
		{"max zero", map[string]string{SysctlMaxUserNS: "0"}, Fail},
		{"max garbage", map[string]string{SysctlMaxUserNS: "lots"}, Warn},
		{"apparmor", map[string]string{SysctlAppArmorUserNS: "1"}, Warn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CheckUserNamespaceSysctls(tt.values)
			if c.Status != tt.want || (c.Status != OK && c.Fix == "") {
				t.Fatalf("%+v, want %v", c, tt.want)
			}
		})
	}
	if SysctlPath(SysctlMaxUserNS) != "/proc/sys/user/max_user_namespaces" {
		t.Fatal(SysctlPath(SysctlMaxUserNS))
	}
}

func TestProbeChecks(t *testing.T) {
	boom := &ProbeError{Kind: ProbeOverlay, Message: "mount: no such device"}
	tests := []struct {
		name string
		c    Check
		want Status
		text string
	}{
		{"userns ok", CheckUserNamespace(nil), OK, "can create"},
		{"userns fails", CheckUserNamespace(errors.New("unshare failed: Operation not permitted")), Fail, "Operation not permitted"},
		{"overlay ok", CheckOverlay(nil, nil), OK, "can be mounted"},
		{"overlay fails", CheckOverlay(nil, boom), Fail, "no such device"},
		{"overlay moot", CheckOverlay(errors.New("x"), nil), Fail, "not checked"},
		{"nftables ok", CheckNftables(nil, nil), OK, "nft command is not needed"},
		{"nftables fails", CheckNftables(nil, errors.New("netlink: operation not supported")), Fail, "operation not supported"},
		{"nftables moot", CheckNftables(errors.New("x"), nil), Fail, "not checked"},
		{"openat2", CheckOpenat2(os.NewSyscallError("openat2", errors.New("function not implemented"))), Fail, "openat2"},
		{"pidfs missing", CheckPidfs(hostid.ErrNoPidfs), Fail, "pidfs"},
		{"pidfs ok", CheckPidfs(nil), OK, "pidfs"},
		{"mount id", CheckMountID(hostid.ErrNoMountID), Fail, "mount ID"},
		{"platform", CheckRunscPlatform("systrap", errors.New("exit status 128")), Fail, "systrap"},
		{"device ok", CheckDevice("/dev/fuse", "the view", nil), OK, "readable"},
		{"device denied", CheckDevice("/dev/fuse", "the view", &fs.PathError{Op: "open", Path: "/dev/fuse", Err: fs.ErrPermission}), Fail, "chmod 0666 /dev/fuse"},
		{"device missing", CheckDevice("/dev/net/tun", "tap", &fs.PathError{Op: "open", Path: "/dev/net/tun", Err: fs.ErrNotExist}), Fail, "modprobe"},
		{"command ok", CheckCommand("git", "/usr/bin/git", "views", "git", Fail, nil), OK, "/usr/bin/git"},
		{"command missing", CheckCommand("slirp4netns", "", "network", "slirp4netns", Fail, errors.New("not found")), Fail, "install the slirp4netns package"},
		{"command optional", CheckCommand("fusermount3", "", "view", "fuse3", Warn, errors.New("not found")), Warn, "fuse3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.c.Status != tt.want || !strings.Contains(tt.c.Summary+" "+tt.c.Fix, tt.text) {
				t.Fatalf("%+v, want %v mentioning %q", tt.c, tt.want, tt.text)
			}
			if tt.c.Status != OK && tt.c.Fix == "" {
				t.Fatalf("%+v has no fix", tt.c)
			}
		})
	}
}

func TestCheckRunsc(t *testing.T) {
	pinned := "v0.0.0-20260905035102-160fafc42237"
	good := RunscFacts{Path: "/usr/libexec/lazaret/runsc", Static: true, VersionLine: "runsc version " + pinned}
	tests := []struct {
		name  string
		facts RunscFacts
		want  []Status
	}{
		{"pinned static", good, []Status{OK, OK, OK}},
		{"not found", RunscFacts{LocateErr: locate.ErrNotFound}, []Status{Fail}},
		{"dynamic", RunscFacts{Path: good.Path, VersionLine: good.VersionLine}, []Status{OK, Fail, OK}},
		{"not elf", RunscFacts{Path: good.Path, ELFErr: errors.New("bad magic"), VersionErr: errors.New("exec format error")}, []Status{OK, Fail, Fail}},
		{"other version", RunscFacts{Path: good.Path, Static: true, VersionLine: "runsc version release-20220510.0"}, []Status{OK, OK, Warn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := CheckRunsc(tt.facts, pinned)
			if len(cs) != len(tt.want) {
				t.Fatalf("%d checks %+v, want %d", len(cs), cs, len(tt.want))
			}
			for i, c := range cs {
				if c.Status != tt.want[i] || (c.Status != OK && c.Fix == "") {
					t.Errorf("check %d: %+v, want %v", i, c, tt.want[i])
				}
			}
		})
	}
}

func TestCheckIDMap(t *testing.T) {
	sub := []byte("other:200000:65536\nme:100000:65536\n")
	tests := []struct {
		name string
		host anchor.IDMapHost
		want Status
		text string
	}{
		{"root", anchor.IDMapHost{UID: 0, GID: 0}, OK, "running as root"},
		{"subordinate ranges", anchor.IDMapHost{UID: 1000, GID: 1000, UserName: "me", SubUID: sub, SubGID: sub, Helpers: true}, OK, "1:100000:65536"},
		{"by uid", anchor.IDMapHost{UID: 1000, GID: 1000, SubUID: []byte("1000:100000:65536\n"), SubGID: []byte("1000:100000:65536\n"), Helpers: true}, OK, "1:100000:65536"},
		{"no helpers", anchor.IDMapHost{UID: 1000, GID: 1000, UserName: "me", SubUID: sub, SubGID: sub}, Warn, "newuidmap"},
		{"no subuid", anchor.IDMapHost{UID: 1000, GID: 1000, UserName: "me", SubGID: sub, Helpers: true}, Warn, "no range for me in /etc/subuid"},
		{"no subgid", anchor.IDMapHost{UID: 1000, GID: 1000, UserName: "me", SubUID: sub, Helpers: true}, Warn, "no range for me in /etc/subgid"},
		{"malformed", anchor.IDMapHost{UID: 1000, GID: 1000, UserName: "me", SubUID: []byte("me:x:1\n"), SubGID: sub, Helpers: true}, Fail, "/etc/subuid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := CheckIDMap(tt.host)
			if c.Status != tt.want || !strings.Contains(c.Summary+" "+c.Fix, tt.text) || (c.Status != OK && c.Fix == "") {
				t.Fatalf("%+v, want %v mentioning %q", c, tt.want, tt.text)
			}
		})
	}
}

func TestCheckRoots(t *testing.T) {
	dir := fs.ModeDir
	tests := []struct {
		name    string
		runtime bool
		facts   FileFacts
		err     error
		want    Status
		text    string
	}{
		{"runtime absent", true, FileFacts{}, fs.ErrNotExist, OK, "first start creates it"},
		{"runtime private", true, FileFacts{Mode: dir | 0o700, UID: 1000}, nil, OK, "private"},
		{"runtime open", true, FileFacts{Mode: dir | 0o755, UID: 1000}, nil, Fail, "chmod 0700 /r"},
		{"runtime foreign", true, FileFacts{Mode: dir | 0o700, UID: 0}, nil, Fail, "owned by uid 0"},
		{"runtime symlink", true, FileFacts{Mode: fs.ModeSymlink | 0o777, UID: 1000}, nil, Fail, "symbolic link"},
		{"runtime file", true, FileFacts{Mode: 0o600, UID: 1000}, nil, Fail, "not a directory"},
		{"runtime unreadable", true, FileFacts{}, fs.ErrPermission, Fail, "cannot inspect"},
		{"storage absent", false, FileFacts{}, fs.ErrNotExist, OK, "first use"},
		{"storage ok", false, FileFacts{Mode: dir | 0o755, UID: 1000}, nil, OK, "0755"},
		{"storage group-writable", false, FileFacts{Mode: dir | 0o775, UID: 1000}, nil, Fail, "chmod go-w /r"},
		{"storage foreign", false, FileFacts{Mode: dir | 0o700, UID: 1001}, nil, Fail, "uid 1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Check
			if tt.runtime {
				c = CheckRuntimeRoot("/r", tt.facts, 1000, tt.err)
			} else {
				c = CheckStorageRoot("/r", tt.facts, 1000, tt.err)
			}
			if c.Status != tt.want || !strings.Contains(c.Summary+" "+c.Fix, tt.text) || (c.Status != OK && c.Fix == "") {
				t.Fatalf("%+v, want %v mentioning %q", c, tt.want, tt.text)
			}
		})
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/run/user/1000/lazaret": "/run/user/1000/lazaret",
		"/tmp/a b":               "'/tmp/a b'",
		"/tmp/it's":              `'/tmp/it'\''s'`,
		"":                       "''",
		"/x;rm -rf ~":            "'/x;rm -rf ~'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// The pinned runsc version must be the one scripts/build-runsc builds.
func TestPinnedVersionMatchesBuildScript(t *testing.T) {
	b, err := os.ReadFile("../../../scripts/build-runsc")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^readonly GVISOR_VERSION=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/build-runsc has no `readonly GVISOR_VERSION=` line")
	}
	if string(m[1]) != PinnedRunscVersion {
		t.Fatalf("scripts/build-runsc pins %s, doctor.PinnedRunscVersion is %s", m[1], PinnedRunscVersion)
	}
}

func TestReportStatus(t *testing.T) {
	r := &Report{Checks: []Check{{Name: "a", Status: OK, Summary: "fine"}, {Name: "b", Status: Warn, Summary: "meh", Fix: "do x"}}}
	r.Finish()
	if !r.OK {
		t.Fatal("a warning failed the report")
	}
	r.Leftovers = append(r.Leftovers, Leftover{Kind: KindMount, Status: Fail, Summary: "s", Command: "umount /m"})
	r.Finish()
	if r.OK {
		t.Fatal("a failed leftover did not fail the report")
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ok    a  fine\n", "warn  b  meh\n", "fix: do x\n", "fail  mount: s\n", "run: umount /m\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := Status(7).MarshalText(); err == nil {
		t.Error("status 7 marshalled")
	}
	if got := Status(7).String(); got != "Status(7)" {
		t.Errorf("Status(7).String() = %q", got)
	}
}

func TestParseProbeKind(t *testing.T) {
	for _, s := range []string{"userns", "overlay", "nftables"} {
		if k, err := ParseProbeKind(s); err != nil || string(k) != s {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := ParseProbeKind("kvm"); !errors.Is(err, ErrUnknownProbe) {
		t.Errorf("kvm: %v", err)
	}
	if !InitialUIDMap("         0          0 4294967295\n") || InitialUIDMap("0 1000 1\n") {
		t.Error("InitialUIDMap")
	}
	if err := RunProbe(ProbeUserNS); err == nil {
		t.Error("a probe ran in the test's own namespaces")
	}
}

func TestStaticELF(t *testing.T) {
	if _, err := StaticELF("/proc/self/exe"); err != nil {
		t.Fatalf("reading the test binary: %v", err)
	}
	p := t.TempDir() + "/script"
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := StaticELF(p); err == nil {
		t.Fatal("a shell script read as ELF")
	}
}

func TestCheckWorkspaceView(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		err         error
		want        Status
		mention     string
	}{
		{"plenty", "524288\n", nil, OK, "max_user_watches=524288"},
		{"at the bound", "65536", nil, OK, "inotify"},
		{"few", "8192\n", nil, Warn, "short timeouts"},
		{"garbage", "lots", nil, Warn, "not a number"},
		{"unreadable", "", fs.ErrPermission, Warn, "cannot read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := CheckWorkspaceView(tt.value, tt.err)
			if c.Status != tt.want || !strings.Contains(c.Summary, tt.mention) || !strings.Contains(c.Summary, "passthrough") {
				t.Fatalf("got %v %q", c.Status, c.Summary)
			}
			if (c.Status == OK) != (c.Fix == "") {
				t.Fatalf("status %v with fix %q", c.Status, c.Fix)
			}
		})
	}
}
