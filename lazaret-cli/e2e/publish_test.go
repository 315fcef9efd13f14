//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freeLoopbackPort is a port of 127.0.0.1 nothing listens on now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// getRoot fetches / from 127.0.0.1:port, retrying while the service
// starts.
func getRoot(port int) (string, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var last error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp4", addr, 2*time.Second)
		if err != nil {
			last = err
			continue
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.0\r\n\r\n")
		b, err := io.ReadAll(c)
		c.Close()
		if err == nil && len(b) > 0 {
			return string(b), nil
		}
		last = fmt.Errorf("%d bytes, %v", len(b), err)
	}
	return "", last
}

// TestPublishThroughCLI publishes a sandbox service as a user does: the
// first exec starts the Domain with --publish, a second terminal adds a
// port to the running Domain, status shows both, bad values are refused
// by flag and port, and stopping the Domain frees the host ports.
func TestPublishThroughCLI(t *testing.T) {
	s := newSandbox(t)
	defer s.waitTeardown()
	hp, hp2 := freeLoopbackPort(t), freeLoopbackPort(t)
	for hp2 == hp {
		hp2 = freeLoopbackPort(t)
	}
	args := append(s.sessionArgs("exec", "60s"), "--publish", fmt.Sprintf("%d:5173", hp), "--",
		"sh", "-c", "pwd; mkdir -p /tmp/www && echo hi-from-the-sandbox >/tmp/www/index.html && httpd -p 5173 -h /tmp/www")
	out, errOut, code := s.cli(args...)
	if code != 0 || out != "/workspace\n" {
		s.dumpLogs()
		t.Fatalf("exec --publish: code %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	defer s.stop()
	if got, err := getRoot(hp); err != nil || !strings.Contains(got, "hi-from-the-sandbox") {
		s.dumpLogs()
		t.Fatalf("GET 127.0.0.1:%d: %q, %v", hp, got, err)
	}

	// A second terminal adds a port to the running Domain.
	second := append(s.sessionArgs("exec", "60s"), "--publish", fmt.Sprintf("%d:5173", hp2), "--", "true")
	if _, errOut, code := s.cli(second...); code != 0 {
		t.Fatalf("second exec --publish: code %d, stderr %q", code, errOut)
	}
	if got, err := getRoot(hp2); err != nil || !strings.Contains(got, "hi-from-the-sandbox") {
		t.Fatalf("GET 127.0.0.1:%d: %q, %v", hp2, got, err)
	}

	var st struct {
		Domains []struct {
			Ports []struct {
				Host        string `json:"host"`
				SandboxPort int    `json:"sandbox_port"`
			} `json:"published_ports"`
		} `json:"domains"`
	}
	js, errOut, code := s.cli("status", "--json")
	if code != 0 || json.Unmarshal([]byte(js), &st) != nil || len(st.Domains) != 1 {
		t.Fatalf("status --json: code %d %q %q", code, js, errOut)
	}
	var hosts []string
	for _, p := range st.Domains[0].Ports {
		if p.SandboxPort != 5173 {
			t.Errorf("status: %+v", p)
		}
		hosts = append(hosts, p.Host)
	}
	if !strings.Contains(strings.Join(hosts, " "), fmt.Sprintf("127.0.0.1:%d", hp)) || !strings.Contains(strings.Join(hosts, " "), fmt.Sprintf("127.0.0.1:%d", hp2)) || len(hosts) != 2 {
		t.Errorf("status shows published ports %q, want %d and %d", hosts, hp, hp2)
	}
	text, _, _ := s.cli("status")
	if !strings.Contains(text, fmt.Sprintf("127.0.0.1:%d -> sandbox port 5173 (tcp)", hp)) {
		t.Errorf("status text lacks the port:\n%s", text)
	}

	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--publish", "8000-8010"}, `--publish "8000-8010": port ranges are not supported`},
		{[]string{"--publish", "99999"}, `sandbox port "99999" is not a port number from 1 to 65535`},
		{[]string{"--publish", fmt.Sprintf("%d:22", hp)}, fmt.Sprintf("host port %d on 127.0.0.1 is already published to sandbox port 5173", hp)},
		{[]string{"--publish", fmt.Sprintf("%d:80", busyPort)}, fmt.Sprintf("host port %d on 127.0.0.1 is already in use", busyPort)},
		{[]string{"--publish-address", "::1", "--publish", "80"}, `--publish-address "::1": not an IPv4 address`},
	} {
		args := append(append(s.sessionArgs("exec", "60s"), tc.flags...), "--", "true")
		_, errOut, code := s.cli(args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("exec %q: code %d, stderr %q; want %q", tc.flags, code, errOut, tc.want)
		}
	}

	if _, errOut, code := s.stop(); code != 0 {
		t.Fatalf("stop: code %d, %s", code, errOut)
	}
	s.waitTeardown()
	for _, p := range []int{hp, hp2} {
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("host port %d still bound after the Domain stopped: %v", p, err)
			continue
		}
		ln.Close()
	}
}

// TestStartPublishOpensInWorkspace runs the README's first session with a
// published port: the shell opens in /workspace, start says what it
// published, and a service the shell starts is reached from the host.
func TestStartPublishOpensInWorkspace(t *testing.T) {
	s := newSandbox(t)
	defer s.waitTeardown()
	hp := freeLoopbackPort(t)
	tm := s.terminal("a", "--publish", fmt.Sprintf("%d:5173", hp))
	tm.waitScreen(fmt.Sprintf("published 127.0.0.1:%d -> sandbox port 5173", hp), 60*time.Second)
	tm.send("pwd > /tmp/where; echo cwd=$(cat /tmp/where)", "Enter")
	tm.waitScreen("cwd=/workspace", 30*time.Second)
	tm.send("mkdir -p /tmp/www && echo hi-from-start >/tmp/www/index.html && httpd -p 5173 -h /tmp/www && echo serving", "Enter")
	tm.waitScreen("serving", 30*time.Second)
	if got, err := getRoot(hp); err != nil || !strings.Contains(got, "hi-from-start") {
		s.dumpLogs()
		t.Fatalf("GET 127.0.0.1:%d: %q, %v", hp, got, err)
	}
	tm.send("exit", "Enter")
	tm.finish("0")
	s.waitTeardown()
	ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(hp)))
	if err != nil {
		t.Fatalf("host port %d still bound after teardown: %v", hp, err)
	}
	ln.Close()
}
