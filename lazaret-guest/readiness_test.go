package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestReadinessCommand runs `lazaret-guest readiness` as the init
// container of a rendered pod would: ready and status 0 when the targets
// behave, status 1 naming the target when one does not, status 2 for a
// bad command line.
func TestReadinessCommand(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := l.Addr().String()
	run1 := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"readiness"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run1("--permitted", addr, "--timeout", "1s"); code != 0 || !strings.HasSuffix(out, "ready\n") {
		t.Errorf("permitted listener: %d %q %q", code, out, errs)
	}
	if code, _, errs := run1("--denied", addr, "--timeout", "1s"); code != 1 || !strings.Contains(errs, "denied target "+addr+": the TCP handshake completed") {
		t.Errorf("denied listener: %d %q", code, errs)
	}
	if code, _, errs := run1("--denied", "nonsense"); code != exitUsage || !strings.Contains(errs, `--denied "nonsense"`) {
		t.Errorf("bad argument: %d %q", code, errs)
	}
}
