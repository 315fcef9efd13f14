package readyprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Targets are what the in-pod prober proves before the agent starts: the
// profile's readiness targets, as `lazaret-cli kube render` writes them
// into the readiness init container's arguments.
type Targets struct {
	Denied    []netip.AddrPort
	Permitted []netip.AddrPort
	DNS       []DNSTarget
}

// DNSTarget is a name that must resolve through one resolver.
type DNSTarget struct {
	Resolver netip.Addr
	Name     string
}

func (t DNSTarget) String() string { return fmt.Sprintf("%q via %v", t.Name, t.Resolver) }

// ErrNotReady is the cause of every failed check.
var ErrNotReady = errors.New("network not ready")

// Failure is one target that did not behave as the policy says.
type Failure struct {
	Kind   string // "denied", "permitted" or "dns"
	Target string
	Detail string
}

func (f Failure) String() string { return f.Kind + " target " + f.Target + ": " + f.Detail }

// NotReadyError lists every failed target, in the order denied,
// permitted, DNS.
type NotReadyError struct{ Failures []Failure }

func (e *NotReadyError) Error() string {
	lines := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		lines[i] = f.String()
	}
	return "network not ready: " + strings.Join(lines, "; ")
}

func (e *NotReadyError) Unwrap() error { return ErrNotReady }

// Report is what the check observed of each target, for the log.
type Report struct {
	Lines []string
}

// Check probes every target at once from the current network namespace,
// each bounded by timeout, and fails with a *NotReadyError naming every
// target that did not behave:
//
//   - a denied target must not answer: the connect times out or finds no
//     route. A completed handshake fails, and so does a reset, which a
//     pod cannot tell apart from a host behind a policy that let the SYN
//     through (the host-side proof counts the SYN at its deny rule; a
//     pod has no such counter).
//   - a permitted target must answer (Outcome.Reachable): a handshake, or
//     a reset from the host behind the path.
//   - a DNS target's name must resolve to at least one address through
//     its resolver, over UDP.
func Check(ctx context.Context, t Targets, timeout time.Duration) (*Report, error) {
	return check(ctx, t, timeout, 53)
}

func check(ctx context.Context, t Targets, timeout time.Duration, dnsPort uint16) (*Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*timeout+time.Second)
	defer cancel()
	type result struct {
		line    string
		failure *Failure
		err     error
	}
	n := len(t.Denied) + len(t.Permitted) + len(t.DNS)
	results := make([]result, n)
	var wg sync.WaitGroup
	connect := func(dst netip.AddrPort) (Outcome, error) {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp4", dst.String())
		if err == nil {
			c.Close()
			return Connected, nil
		}
		out, err := Classify(ctx, err)
		if err != nil {
			return 0, fmt.Errorf("connecting to %v: %w", dst, err)
		}
		return out, nil
	}
	i := 0
	for _, dst := range t.Denied {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			out, err := connect(dst)
			r.err = err
			r.line = fmt.Sprintf("denied %v: %v", dst, out)
			switch {
			case err != nil:
			case out == Connected:
				r.failure = &Failure{"denied", dst.String(), "the TCP handshake completed; the cluster's NetworkPolicy does not drop it (is the CNI enforcing NetworkPolicy?)"}
			case out == Refused:
				r.failure = &Failure{"denied", dst.String(), "a TCP reset answered; a pod cannot tell a CNI's reject from a host behind a policy that let the SYN through"}
			}
		}(&results[i])
		i++
	}
	for _, dst := range t.Permitted {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			out, err := connect(dst)
			r.err = err
			r.line = fmt.Sprintf("permitted %v: %v", dst, out)
			if err == nil && !out.Reachable() {
				r.failure = &Failure{"permitted", dst.String(), "TCP connect " + out.String() + " within " + timeout.String()}
			}
		}(&results[i])
		i++
	}
	for _, q := range t.DNS {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(q.Resolver, dnsPort)))
			if err != nil {
				r.failure = &Failure{"dns", q.String(), "cannot open a socket to the resolver: " + err.Error()}
				return
			}
			defer conn.Close()
			// Two sends within the timeout, as on the host.
			addrs, rc, err := Exchange(ctx, conn, q.Name, timeout/2, 2)
			r.err = err
			r.line = fmt.Sprintf("dns %v: %v", q, addrs)
			switch {
			case err != nil:
			case rc == NoAnswer:
				r.failure = &Failure{"dns", q.String(), "no answer within " + timeout.String()}
			case rc == AnswerRefused:
				r.failure = &Failure{"dns", q.String(), "the resolver refused the query"}
			case rc == AnswerOther:
				r.failure = &Failure{"dns", q.String(), "the resolver answered with an error code"}
			case len(addrs) == 0:
				r.failure = &Failure{"dns", q.String(), "the answer holds no address"}
			}
		}(&results[i])
		i++
	}
	wg.Wait()
	rep := &Report{}
	var fail NotReadyError
	for _, r := range results {
		if r.err != nil {
			return nil, fmt.Errorf("running readiness probes: %w", r.err)
		}
		rep.Lines = append(rep.Lines, r.line)
		if r.failure != nil {
			fail.Failures = append(fail.Failures, *r.failure)
		}
	}
	if len(fail.Failures) > 0 {
		return rep, &fail
	}
	return rep, nil
}

// MaxTimeout bounds the prober's --timeout.
const MaxTimeout = 5 * time.Minute

// ParseArgs reads the prober's arguments: --denied ADDR:PORT,
// --permitted ADDR:PORT and --dns RESOLVER=NAME, each repeatable, and
// --timeout DURATION (default 3s). Errors name the argument.
func ParseArgs(args []string) (Targets, time.Duration, error) {
	var t Targets
	timeout := 3 * time.Second
	for i := 0; i < len(args); i++ {
		flag := args[i]
		val, inline := "", false
		if k, v, ok := strings.Cut(flag, "="); ok && strings.HasPrefix(flag, "--") {
			flag, val, inline = k, v, true
		}
		if !inline {
			if i+1 >= len(args) {
				return t, 0, fmt.Errorf("%s needs a value", flag)
			}
			i++
			val = args[i]
		}
		switch flag {
		case "--denied", "--permitted":
			ap, err := netip.ParseAddrPort(val)
			if err != nil || !ap.Addr().Is4() || ap.Port() == 0 {
				return t, 0, fmt.Errorf("%s %q: want IPV4:PORT", flag, val)
			}
			if flag == "--denied" {
				t.Denied = append(t.Denied, ap)
			} else {
				t.Permitted = append(t.Permitted, ap)
			}
		case "--dns":
			r, name, ok := strings.Cut(val, "=")
			a, err := netip.ParseAddr(r)
			if !ok || err != nil || !a.Is4() || name == "" {
				return t, 0, fmt.Errorf("--dns %q: want RESOLVER=NAME", val)
			}
			if _, _, err := EncodeQuery(name); err != nil {
				return t, 0, fmt.Errorf("--dns %q: %w", val, err)
			}
			t.DNS = append(t.DNS, DNSTarget{Resolver: a, Name: name})
		case "--timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 || d > MaxTimeout {
				return t, 0, fmt.Errorf("--timeout %q: want a duration up to %v", val, MaxTimeout)
			}
			timeout = d
		default:
			return t, 0, fmt.Errorf("unknown argument %q", args[i])
		}
	}
	if len(t.Denied)+len(t.Permitted)+len(t.DNS) == 0 {
		return t, 0, errors.New("no targets: give --denied, --permitted or --dns")
	}
	return t, timeout, nil
}
