package coordinator

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/testgate"
)

const (
	clientImage       = "localhost/lazaret-coordinator-clients:1"
	brokerHostVar     = "LZ_E2E_BROKER_SOURCE"
	brokerTestTimeout = "20"
)

// brokerNames are the test internet's TLS hosts: the brokered API and
// git server, and another allowed host nothing is brokered to.
var (
	brokerAPI   = netlab.DynamicName(netlab.APIHost, 60)
	brokerOther = netlab.DynamicName(netlab.OtherHost, 60)
	// brokerPrivate is brokered too, but its name answers a private
	// address (10.1.2.3), which the broker must not dial.
	brokerPrivate = netlab.DynamicName(netlab.InternetPrivate[0], 60)
)

// brokerConfig is namesConfig with two credentials of one real value
// (the test internet's BrokerSecret): API_KEY in x-api-key and GIT_TOKEN
// as the basic-auth password, both only to the API host's TLS port,
// whose certificate the upstream CA file vouches for. The readiness host
// is the brokered one: the probe reaches the broker.
func brokerConfig(e *env, upstreamCA string) string {
	return fmt.Sprintf(`schema = "lazaret-trusted-host-config-v2"
[storage]
data_root = %q
[profiles.%s]
image = %q
persistent_dirs = ["/home/agent"]
allow_egress = ["198.51.100.0/24"]
deny_egress = ["198.51.100.64/26"]
allow_hosts = ["*.%s"]
resolver = %q
[profiles.%s.env]
API_KEY = "env:%s"
GIT_TOKEN = "env:%s"
[[profiles.%s.credentials]]
env = "API_KEY"
hosts = [%q, %q]
port = %d
scheme = "header"
header = "x-api-key"
upstream_ca = %q
[[profiles.%s.credentials]]
env = "GIT_TOKEN"
hosts = [%q]
port = %d
scheme = "basic"
upstream_ca = %q
[profiles.%s.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
hosts = [{ name = %q, port = %d }]
`, e.storage, testProfile, clientImage, netlab.DynamicSuffix, netlab.InternetResolver,
		testProfile, brokerHostVar, brokerHostVar,
		testProfile, brokerAPI, brokerPrivate, netlab.TLSPort, upstreamCA,
		testProfile, brokerAPI, netlab.TLSPort, upstreamCA,
		testProfile, brokerAPI, netlab.TLSPort)
}

// clientImageTree stores clientImage: the busybox tree plus the host's
// curl and git (with git-remote-https), every library ldd lists for
// them, and the host's CA bundle, so that real clients run in the
// sandbox.
func clientImageTree(t *testing.T, storage string) {
	t.Helper()
	bb := testgate.Command(t, "busybox")
	curl := testgate.Command(t, "curl")
	git := testgate.Command(t, "git")
	remote := "/usr/lib/git-core/git-remote-https"
	if _, err := os.Stat(remote); err != nil {
		t.Skipf("skipping: %s not found (git's HTTPS helper)", remote)
	}
	tree := t.TempDir()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "usr/lib/git-core", "etc/ssl/certs", "root", "tmp", "home/agent", "workspace"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(tree, "tmp"), 0o1777)
	install := func(src, dst string, mode os.FileMode) {
		t.Helper()
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tree, dst)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, dst), data, mode); err != nil {
			t.Fatal(err)
		}
	}
	installBusybox(t, bb, tree)
	bins := map[string]string{curl: "usr/bin/curl", git: "usr/bin/git", remote: "usr/lib/git-core/git-remote-https"}
	libs := map[string]bool{}
	for src, dst := range bins {
		os.Remove(filepath.Join(tree, dst)) // busybox may have an applet of that name
		install(src, dst, 0o755)
		out, err := exec.Command("ldd", src).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", src, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "/") {
					libs[f] = true
				}
			}
		}
	}
	for lib := range libs {
		install(lib, strings.TrimPrefix(lib, "/"), 0o755)
	}
	for _, l := range []struct{ link, target string }{
		{"usr/lib/git-core/git", "/usr/bin/git"},
		{"usr/lib/git-core/git-remote-http", "git-remote-https"},
	} {
		if err := os.Symlink(l.target, filepath.Join(tree, l.link)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		install("/etc/ssl/certs/ca-certificates.crt", "etc/ssl/certs/ca-certificates.crt", 0o644)
	}
	os.WriteFile(filepath.Join(tree, "etc/passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "etc/group"), []byte("root:x:0:\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "etc/nsswitch.conf"), []byte("hosts: files dns\n"), 0o644)
	storeTreeImage(t, tree, storage, clientImage)
}

// TestServeEndToEndCredentialBroker starts a sandbox with two brokered
// credentials and attacks the broker from inside with real clients
// (curl, git). The sandbox holds placeholders only; the broker puts the
// real value into requests to the credential's destination, in its
// header, and refuses the placeholder anywhere else it sees it; a host
// that is not brokered gets the placeholder, which is worth nothing; an
// echo of the real value comes back as the placeholder; the real value
// is in no file, environment or process memory of the sandbox, and in
// no file under the storage and runtime roots; after the network
// sidecar (which runs the broker) is killed with SIGKILL, the next
// generation brokers again with a fresh placeholder.
func TestServeEndToEndCredentialBroker(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	clientImageTree(t, e.storage)
	caFile := filepath.Join(filepath.Dir(e.cfgFile), "test-internet-ca.pem")
	if err := os.WriteFile(caFile, netlab.TestCAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cfgFile, []byte(brokerConfig(e, caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.environ = append(e.environ, brokerHostVar+"="+netlab.BrokerSecret)
	e.resolve(t)
	h := e.start(t, time.Minute)
	t.Logf("start report %q, start to ready %v", h.report, h.ready)
	c, session := e.client(t)
	sh := func(t *testing.T, script string) (string, string, int) {
		t.Helper()
		out, errs, x := execute(t, c, session(), "sh", "-c", script)
		return out, errs, code(x)
	}
	api := fmt.Sprintf("https://%s:%d", brokerAPI, netlab.TLSPort)
	other := fmt.Sprintf("https://%s:%d", brokerOther, netlab.TLSPort)
	curl := "curl -sS --max-time " + brokerTestTimeout + " "

	var placeholder string
	t.Run("the sandbox holds a placeholder of the same shape", func(t *testing.T) {
		out, _, _ := sh(t, "printf %s \"$API_KEY\"")
		placeholder = out
		if out == netlab.BrokerSecret || len(out) != len(netlab.BrokerSecret) || !strings.HasPrefix(out, "lzt-real-") {
			t.Fatalf("API_KEY in the sandbox is %q (the real value has %d bytes)", out, len(netlab.BrokerSecret))
		}
	})
	t.Run("curl: the brokered request carries the real value", func(t *testing.T) {
		out, errs, x := sh(t, curl+"-H \"x-api-key: $API_KEY\" "+api+"/check")
		if x != 0 || !strings.Contains(out, "real credential received in x-api-key") {
			t.Fatalf("stdout %q stderr %q exit %d\n%s", out, errs, x, e.log(t))
		}
	})
	t.Run("curl trusts the broker through the image's trust store", func(t *testing.T) {
		out, _, _ := sh(t, "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt; cat /run/lazaret/broker-ca.pem | head -1")
		if !strings.Contains(out, "-----BEGIN CERTIFICATE-----") {
			t.Fatalf("trust store: %q", out)
		}
	})
	t.Run("the placeholder in another header is refused", func(t *testing.T) {
		out, errs, x := sh(t, curl+"-D - -H \"authorization: Bearer $API_KEY\" "+api+"/check")
		if x != 0 || !strings.Contains(out, " 403") || !strings.Contains(strings.ToLower(out), "x-lazaret-broker: refused") || strings.Contains(out, "real credential received") {
			t.Fatalf("stdout %q stderr %q exit %d", out, errs, x)
		}
	})
	t.Run("the placeholder in the URL is refused", func(t *testing.T) {
		out, errs, x := sh(t, curl+"-D - "+api+"/check?key=$API_KEY")
		if x != 0 || !strings.Contains(out, " 403") {
			t.Fatalf("stdout %q stderr %q exit %d", out, errs, x)
		}
	})
	t.Run("another allowed host gets only the worthless placeholder", func(t *testing.T) {
		// Not brokered, so not intercepted: the sandbox speaks TLS to the
		// host itself (-k: the sandbox does not trust the test CA).
		out, errs, x := sh(t, curl+"-k -H \"x-api-key: $API_KEY\" "+other+"/check")
		if x != 0 || strings.Contains(out, "real credential received") || !strings.Contains(out, "no real credential") {
			t.Fatalf("stdout %q stderr %q exit %d", out, errs, x)
		}
	})
	t.Run("the broker does not intercept another host", func(t *testing.T) {
		// Without -k the sandbox must refuse the other host's certificate:
		// it was not issued by the broker's CA.
		_, errs, x := sh(t, curl+other+"/check")
		if x == 0 || !strings.Contains(errs, "certificate") {
			t.Fatalf("curl to the other host without -k: exit %d stderr %q", x, errs)
		}
	})
	t.Run("an echo of the real value comes back as the placeholder", func(t *testing.T) {
		out, errs, x := sh(t, curl+"-D - -H \"x-api-key: $API_KEY\" "+api+"/echo-secret")
		if x != 0 || strings.Contains(out, netlab.BrokerSecret) || !strings.Contains(out, placeholder) {
			t.Fatalf("stdout %q stderr %q exit %d", out, errs, x)
		}
	})
	t.Run("a brokered name that answers a private address is not dialled", func(t *testing.T) {
		// DNS rebinding aimed at the broker: the name is brokered, but
		// the broker resolves it itself and admits its addresses like
		// learned ones, so the real value never goes to 10.1.2.3.
		out, errs, x := sh(t, curl+"-D - -H \"x-api-key: $API_KEY\" "+fmt.Sprintf("https://%s:%d", brokerPrivate, netlab.TLSPort)+"/check")
		if x != 0 || !strings.Contains(out, " 502") || !strings.Contains(strings.ToLower(out), "x-lazaret-broker: upstream-failed") {
			t.Fatalf("stdout %q stderr %q exit %d", out, errs, x)
		}
		if log := e.log(t); !strings.Contains(log, "credential broker could not reach a destination") || !strings.Contains(log, "10.1.2.3") {
			t.Fatalf("the coordinator log does not say why:\n%s", log)
		}
	})
	t.Run("git clone over HTTPS with the placeholder as password", func(t *testing.T) {
		out, errs, x := sh(t, "cd /tmp && git clone -q \"https://x-access-token:$GIT_TOKEN@"+brokerAPI+fmt.Sprintf(":%d", netlab.TLSPort)+"/repo.git\" repo && cat repo/README")
		if x != 0 || !strings.Contains(out, "hello from the test internet's git") {
			t.Fatalf("stdout %q stderr %q exit %d\n%s", out, errs, x, e.log(t))
		}
		// git keeps the URL, with the placeholder, in the clone's config:
		// the placeholder, never the real value.
		out, _, _ = sh(t, "cat /tmp/repo/.git/config")
		if strings.Contains(out, netlab.BrokerSecret) {
			t.Fatalf("the clone's config holds the real value: %q", out)
		}
	})
	t.Run("the real value is nowhere in the sandbox", func(t *testing.T) {
		// The scanning shell makes a brokered request and keeps the
		// answer, as curl's output, in its memory; then it copies out
		// through the workspace, where the host searches them, its own
		// readable writable memory (gVisor lets a process open only its
		// own /proc/PID/mem here, even a child's is refused), every
		// process's environment and the sandbox's own directories. The
		// sandbox never holds what is searched for.
		script := `d=/workspace/.memscan; mkdir -p $d
r=$(curl -sS --max-time 20 -H "x-api-key: $API_KEY" ` + api + `/check)
printf '%s\n' "$r" > $d/answer
i=0
while read range perms rest; do
  case $perms in rw*) ;; *) continue ;; esac
  start=$((0x${range%-*})); end=$((0x${range#*-}))
  [ $((end-start)) -gt 16777216 ] && continue
  exec 3< /proc/$$/mem
  dd bs=4096 skip=$((start/4096)) count=$(((end-start)/4096)) <&3 2>/dev/null > $d/self.mem.$i
  exec 3<&-
  i=$((i+1))
done < /proc/$$/maps
for pid in $(ls /proc | grep '^[0-9]*$'); do
  cat /proc/$pid/environ > $d/$pid.environ 2>/dev/null
done
tar cf $d/dirs.tar /etc /root /home /tmp /run/lazaret 2>/dev/null
ls $d | wc -l`
		out, errs, x := execute(t, c, session(), "sh", "-c", script)
		if code(x) != 0 {
			t.Fatalf("scan: stdout %q stderr %q exit %+v", out, errs, x)
		}
		dir := filepath.Join(e.workspace, ".memscan")
		defer os.RemoveAll(dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var seen, scanned int
		for _, ent := range entries {
			b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
			if err != nil {
				t.Fatal(err)
			}
			scanned += len(b)
			if bytes.Contains(b, []byte(netlab.BrokerSecret)) {
				t.Errorf("sandbox %s holds the real value", ent.Name())
			}
			if bytes.Contains(b, []byte(placeholder)) && strings.Contains(ent.Name(), ".mem.") {
				seen++
			}
		}
		if seen == 0 {
			var names []string
			for _, ent := range entries {
				info, _ := ent.Info()
				names = append(names, fmt.Sprintf("%s:%d", ent.Name(), info.Size()))
			}
			t.Fatalf("no memory dump of %d files (%d bytes: %v) holds the placeholder either: the scan proves nothing\nstdout %q stderr %q", len(entries), scanned, names, out, errs)
		}
		t.Logf("sandbox scan: %d files, %d bytes, placeholder in %d memory dumps, real value in none", len(entries), scanned, seen)
	})
	t.Run("refusals reach the name log, status and log", func(t *testing.T) {
		recs, err := netsidecar.ReadNameLogRecords(control.NameLogPath(e.paths.Dir))
		if err != nil {
			t.Fatal(err)
		}
		var refused, brokered int
		for _, r := range recs {
			switch r.Kind {
			case netsidecar.BrokerRefused:
				refused++
			case netsidecar.BrokerBrokered:
				brokered++
			}
		}
		if refused < 2 || brokered < 3 {
			t.Fatalf("name log: %d refusals, %d brokered requests, want at least 2 and 3", refused, brokered)
		}
		creds, err := control.ReadBrokeredCredentials(e.paths.Dir)
		if err != nil || len(creds) != 2 {
			t.Fatalf("brokered credentials record: %+v, %v", creds, err)
		}
		// What the developer reads: log shows the refusals after the
		// audit log, status the credentials and where they go.
		out, errs, x := e.cli(t, "log")
		if x != 0 || !strings.Contains(out, "credential broker refusals in the running generation:") ||
			!strings.Contains(out, "refused "+brokerAPI+fmt.Sprintf(":%d", netlab.TLSPort)) || !strings.Contains(out, "placeholder of API_KEY") {
			t.Errorf("lazaret-cli log: exit %d\n%s\n%s", x, out, errs)
		}
		cmd := exec.Command(builtCLI.path, "status", "--config", e.cfgFile, "--profile", testProfile)
		cmd.Env = e.environ
		status, err := cmd.CombinedOutput()
		want := "credential API_KEY brokered (header x-api-key) only to " + brokerAPI + fmt.Sprintf(":%d", netlab.TLSPort)
		if err != nil || !strings.Contains(string(status), want) || !strings.Contains(string(status), "broker-refused") {
			t.Errorf("lazaret-cli status: %v, want %q and the refusals:\n%s", err, want, status)
		}
		for _, b := range [][]byte{[]byte(out), status} {
			if bytes.Contains(b, []byte(netlab.BrokerSecret)) || bytes.Contains(b, []byte(placeholder)) {
				t.Errorf("a value or placeholder is printed:\n%s", b)
			}
		}
	})
	t.Run("the real value is in no file of the storage and runtime roots", func(t *testing.T) {
		for _, root := range []string{e.storage, e.xdgRun} {
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return nil
				}
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(netlab.BrokerSecret)) {
					t.Errorf("%s holds the real value", p)
				}
				return nil
			})
		}
	})

	t.Run("kill -9 of the broker, then the next generation brokers again", func(t *testing.T) {
		pid, ok := descendant(h.cmd.Process.Pid, "lazaret-netsidecar", nil)
		if !ok {
			t.Fatal("no lazaret-netsidecar below the coordinator")
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.Close()
		select {
		case <-h.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("the coordinator did not end the generation after the sidecar was killed\n%s", e.log(t))
		}
		h2 := e.start(t, time.Minute)
		c2, session2 := e.client(t)
		out, errs, x := execute(t, c2, session2(), "sh", "-c", "printf '%s\\n' \"$API_KEY\"; "+curl+"-H \"x-api-key: $API_KEY\" "+api+"/check")
		if code(x) != 0 || !strings.Contains(out, "real credential received in x-api-key") {
			t.Fatalf("after recovery: stdout %q stderr %q exit %+v\n%s", out, errs, x, e.log(t))
		}
		if fresh, _, _ := strings.Cut(out, "\n"); fresh == placeholder || fresh == netlab.BrokerSecret {
			t.Fatalf("the next generation's placeholder %q is not fresh", fresh)
		}
		c2.Close()
		h2.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h2.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("the coordinator did not stop\n%s", e.log(t))
		}
		checkNothingLeft(t, e)
	})
}
