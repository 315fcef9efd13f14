package cli

import (
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"lazaret.dev/pkg/control"
)

func TestParsePublish(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	fwd := func(h, s uint16) control.PortForward {
		return control.PortForward{HostAddr: lo, HostPort: h, SandboxPort: s}
	}
	for _, tc := range []struct {
		name  string
		specs []string
		want  []control.PortForward
		err   string
	}{
		{"sandbox port only is the same host port", []string{"5173"}, []control.PortForward{fwd(5173, 5173)}, ""},
		{"host and sandbox", []string{"8080:80"}, []control.PortForward{fwd(8080, 80)}, ""},
		{"several, sorted by host port", []string{"9000:90", "3000"}, []control.PortForward{fwd(3000, 3000), fwd(9000, 90)}, ""},
		{"two host ports to one sandbox port", []string{"8080:80", "8081:80"}, []control.PortForward{fwd(8080, 80), fwd(8081, 80)}, ""},
		{"empty", []string{""}, nil, `--publish "": sandbox port "" is not a port number`},
		{"not a number", []string{"web"}, nil, `sandbox port "web" is not a port number`},
		{"zero", []string{"0"}, nil, `sandbox port "0" is not a port number from 1 to 65535`},
		{"too large", []string{"65536"}, nil, `sandbox port "65536" is not a port number`},
		{"host port zero", []string{"0:80"}, nil, `host port "0" is not a port number`},
		{"negative", []string{"-1"}, nil, "port ranges are not supported"},
		{"range", []string{"8000-8010"}, nil, `--publish "8000-8010": port ranges are not supported; repeat --publish for each port`},
		{"range on the host", []string{"8000-8001:80"}, nil, "port ranges are not supported"},
		{"address in the value", []string{"0.0.0.0:80:80"}, nil, "a bind address goes in --publish-address"},
		{"udp", []string{"53/udp"}, nil, `sandbox port "53/udp" is not a port number`},
		{"duplicate", []string{"5173", "5173:5173"}, nil, `--publish "5173:5173": host port 5173 is given twice`},
		{"host port to two sandbox ports", []string{"8080:80", "8080:81"}, nil, "host port 8080 is already forwarded to sandbox port 80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePublish(tc.specs, lo)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parsePublish(%q) = %v, %v; want an error with %q", tc.specs, got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("parsePublish(%q) = %v, %v; want %v", tc.specs, got, err, tc.want)
			}
		})
	}
	var many []string
	for i := range control.MaxPortForwards + 1 {
		many = append(many, strconv.Itoa(10000+i))
	}
	if _, err := parsePublish(many, lo); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("%d ports: %v", len(many), err)
	}
}

func TestParsePublishAddress(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		exposed bool
		err     bool
	}{
		{"", "127.0.0.1", false, false},
		{"127.0.0.2", "127.0.0.2", false, false},
		{"0.0.0.0", "0.0.0.0", true, false},
		{"192.0.2.7", "192.0.2.7", true, false},
		{"::1", "", false, true},
		{"localhost", "", false, true},
	} {
		a, exposed, err := parsePublishAddress(tc.in)
		if (err != nil) != tc.err || (err == nil && (a.String() != tc.want || exposed != tc.exposed)) {
			t.Errorf("parsePublishAddress(%q) = %v, %v, %v", tc.in, a, exposed, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--publish-address") {
			t.Errorf("error %q does not name the flag", err)
		}
	}
}

func TestCheckBindable(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := uint16(ln.Addr().(*net.TCPAddr).Port)
	f := control.PortForward{HostAddr: netip.MustParseAddr("127.0.0.1"), HostPort: busy, SandboxPort: 80}
	dir := t.TempDir()
	err = checkBindable([]control.PortForward{f}, dir)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), ln.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):]) {
		t.Fatalf("checkBindable of a port in use = %v", err)
	}
	// A port the Domain itself already publishes is not refused here.
	if err := control.WritePublishedPorts(dir, []control.PortForward{f}); err != nil {
		t.Fatal(err)
	}
	if err := checkBindable([]control.PortForward{f}, dir); err != nil {
		t.Fatalf("checkBindable of the Domain's own port = %v", err)
	}
	other := f
	other.SandboxPort = 81
	if err := checkBindable([]control.PortForward{other}, dir); err == nil || !strings.Contains(err.Error(), "already published to sandbox port 80") {
		t.Fatalf("checkBindable of the Domain's port to another sandbox port = %v", err)
	}
	if err := checkBindable([]control.PortForward{f}, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a port in use passed with no record")
	}
}
