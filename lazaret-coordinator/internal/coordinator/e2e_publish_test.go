package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netlab"
)

// sandboxService is the sandbox port the tests publish: busybox httpd,
// daemonised, serving one file.
const sandboxService = 5173

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// httpGet fetches / from addr with a plain HTTP/1.0 request, retrying
// for a few seconds while the service starts.
func httpGet(addr string) (string, error) {
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
		if err != nil || len(b) == 0 {
			last = fmt.Errorf("reading the answer: %v (%d bytes)", err, len(b))
			continue
		}
		return string(b), nil
	}
	return "", last
}

// portFree reports whether 127.0.0.1:port can be bound.
func portFree(port uint16) bool {
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port).String())
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// TestServeEndToEndPublish starts a real sandbox, checks that a session
// opens in /workspace, publishes a service of the sandbox on the host's
// loopback and reaches it there, checks that the sandbox still reaches
// nothing of the host, refuses a port in use and a host port published
// to another sandbox port, and checks that teardown frees the host port
// and removes the record.
func TestServeEndToEndPublish(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	h := e.start(t, time.Second)
	c, session := e.client(t)
	ctx := context.Background()

	t.Run("session opens in /workspace", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "pwd")
		if code(x) != 0 || out != "/workspace\n" {
			t.Fatalf("pwd: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})

	out, errs, x := execute(t, c, session(), "sh", "-c",
		"mkdir -p /tmp/www && echo hi-from-the-sandbox >/tmp/www/index.html && httpd -p "+strconv.Itoa(sandboxService)+" -h /tmp/www")
	if code(x) != 0 {
		t.Fatalf("starting httpd: stdout %q stderr %q exit %+v", out, errs, x)
	}
	hp := freePort(t)
	fwd := control.PortForward{HostAddr: netip.MustParseAddr("127.0.0.1"), HostPort: hp, SandboxPort: sandboxService}
	all, err := c.Publish(ctx, []control.PortForward{fwd})
	if err != nil {
		t.Fatalf("publishing %v: %v\n%s", fwd, err, e.log(t))
	}
	if !slices.Equal(all, []control.PortForward{fwd}) {
		t.Fatalf("published %v, want %v", all, fwd)
	}

	t.Run("reached from the host", func(t *testing.T) {
		got, err := httpGet(fwd.Host())
		if err != nil || !strings.Contains(got, "hi-from-the-sandbox") {
			t.Fatalf("GET http://%s/: %q, %v\n%s", fwd.Host(), got, err, e.log(t))
		}
	})
	t.Run("recorded for status", func(t *testing.T) {
		rec, err := control.ReadPublishedPorts(e.paths.Dir)
		if err != nil || !slices.Equal(rec, []control.PortForward{fwd}) {
			t.Fatalf("record %v, %v; want %v", rec, err, fwd)
		}
	})
	t.Run("publishing again is no change", func(t *testing.T) {
		all, err := c.Publish(ctx, []control.PortForward{fwd})
		if err != nil || !slices.Equal(all, []control.PortForward{fwd}) {
			t.Fatalf("publishing %v again: %v, %v", fwd, all, err)
		}
	})
	t.Run("host port already published elsewhere", func(t *testing.T) {
		other := fwd
		other.SandboxPort = 22
		_, err := c.Publish(ctx, []control.PortForward{other})
		if !errors.Is(err, control.ErrPortRefused) || !strings.Contains(err.Error(), strconv.Itoa(int(hp))) {
			t.Fatalf("publishing %v: %v, want a refusal naming port %d", other, err, hp)
		}
	})
	t.Run("host port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		busy := uint16(ln.Addr().(*net.TCPAddr).Port)
		f := control.PortForward{HostAddr: fwd.HostAddr, HostPort: busy, SandboxPort: sandboxService}
		_, err = c.Publish(ctx, []control.PortForward{f})
		if !errors.Is(err, control.ErrPortRefused) || !strings.Contains(err.Error(), fmt.Sprintf("host port %d on 127.0.0.1 is already in use", busy)) {
			t.Fatalf("publishing %v: %v, want a refusal naming port %d in use", f, err, busy)
		}
	})
	// A refusal ends the connection; the next request dials again.
	t.Run("the sandbox still reaches nothing of the host", func(t *testing.T) {
		for _, dst := range []string{"10.0.2.2", "10.255.255.1", netlab.HostLinkAddress.Addr().String()} {
			for _, port := range []string{strconv.Itoa(int(hp)), "443"} {
				out, errs, x := execute(t, c, session(), "nc", "-w", "1", dst, port)
				if code(x) == 0 || strings.Contains(out, "hello from") || strings.Contains(out, "hi-from") {
					t.Errorf("nc -w 1 %s %s from the sandbox: stdout %q stderr %q exit %+v", dst, port, out, errs, x)
				}
			}
		}
	})
	t.Run("host port held while published", func(t *testing.T) {
		if portFree(hp) {
			t.Fatalf("host port %d is free while published", hp)
		}
	})

	c.Close()
	waitExit(t, e, h)
	t.Run("teardown frees the host port", func(t *testing.T) {
		if !portFree(hp) {
			t.Errorf("host port %d is still bound after teardown", hp)
		}
		if _, err := os.Stat(filepath.Join(e.paths.Dir, control.PublishedPortsName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the published ports record is still there: %v", err)
		}
	})
	checkNothingLeft(t, e)
}

// TestServeEndToEndPublishRecovery kills the coordinator of a generation
// that publishes a port: the host port is free once the sidecar followed
// it, and the next start's recovery removes the record.
func TestServeEndToEndPublishRecovery(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.seedKept(t)
	h := e.start(t, time.Minute)
	c, _ := e.client(t)
	hp := freePort(t)
	fwd := control.PortForward{HostAddr: netip.MustParseAddr("127.0.0.1"), HostPort: hp, SandboxPort: sandboxService}
	if _, err := c.Publish(context.Background(), []control.PortForward{fwd}); err != nil {
		t.Fatalf("publishing %v: %v\n%s", fwd, err, e.log(t))
	}
	if portFree(hp) {
		t.Fatalf("host port %d is free while published", hp)
	}
	c.Close()
	h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.done
	for deadline := time.Now().Add(30 * time.Second); !portFree(hp); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("host port %d still bound 30 s after the coordinator was killed", hp)
		}
	}
	if _, err := os.Stat(filepath.Join(e.paths.Dir, control.PublishedPortsName)); err != nil {
		t.Fatalf("the record of the killed generation is gone before recovery: %v", err)
	}
	e.recoverAndCheck(t)
	if _, err := os.Stat(filepath.Join(e.paths.Dir, control.PublishedPortsName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the published ports record survived recovery: %v", err)
	}
	if !portFree(hp) {
		t.Errorf("host port %d bound after recovery", hp)
	}
}
