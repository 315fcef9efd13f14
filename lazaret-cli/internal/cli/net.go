package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netprofile"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
)

// Exit codes of `net explain`.
const (
	netExitAllowed = 0
	netExitDenied  = 1
	netExitError   = 2
)

// defaultExplainPort is the port explained when ADDRESS has none.
const defaultExplainPort = 443

// connectivityHelperAddresses are the gateway and DNS forwarder of the
// connectivity helper (slirp4netns), which lead to the host: the network
// path adds them to the host addresses it always drops (pkg/netpath
// SlirpAddresses, docs/NETWORK.md).
var connectivityHelperAddresses = []netip.Addr{netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("10.0.2.3")}

// pinningResolver is the enforcement end of the sandbox's link, where the
// pinning resolver listens for a profile with allow_hosts (pkg/netpath
// DefaultLink).
var pinningResolver = netip.MustParseAddr("10.255.255.1")

// ErrExplainAddress means the ADDRESS argument of `net explain` is not an
// IP address with an optional port.
var ErrExplainAddress = errors.New("not an IP address with an optional port")

func netCommand() *cli.Command {
	return &cli.Command{
		Name:  "net",
		Usage: "inspect a profile's network policy",
		Subcommands: []*cli.Command{{
			Name:      "explain",
			Usage:     "say whether the profile's policy lets the sandbox reach an address or a host name, and which rule decides",
			ArgsUsage: "ADDRESS[:PORT] | HOSTNAME",
			Description: "ADDRESS is an IPv4 address (an IPv6 address is always denied); PORT defaults to 443, TCP\n" +
				"unless --udp is given. Port 53 is DNS, which goes only to the profile's readiness resolvers\n" +
				"(or, with allow_hosts, to the pinning resolver). With allow_hosts, an address no prefix allows\n" +
				"is allowed while the running sandbox has it pinned; HOSTNAME asks whether the pinning resolver\n" +
				"answers that name. Exit status: 0 allowed, 1 denied, 2 the question could not be answered\n" +
				"(docs/NETWORK.md).",
			Flags: []cli.Flag{
				profileFlag(),
				workspaceFlag(),
				configFileFlag(),
				&cli.BoolFlag{Name: "udp", Usage: "explain UDP instead of TCP"},
			},
			Action: runNetExplain,
		}, {
			Name:  "log",
			Usage: "list the host names the pinning resolver refused in the running sandbox (and, with --all, what it pinned)",
			Description: "Reads the name log of the Domain of --profile and --workspace. Names are what the sandbox\n" +
				"asked for, printed with every byte outside [a-z0-9.-_*] escaped as \\xNN.",
			Flags: []cli.Flag{
				profileFlag(),
				workspaceFlag(),
				configFileFlag(),
				&cli.BoolFlag{Name: "all", Usage: "list every record: pins, refusals, upstream failures"},
				jsonFlag("one record per line"),
			},
			Action: runNetLog,
		}},
	}
}

// explainFlags are the flags of `net explain` that may also follow
// ADDRESS, as in `net explain 192.0.2.1:53 --udp`.
var explainFlags = map[string]bool{"profile": false, "workspace": false, "config": false, "udp": true}

// positionalAndTrailingFlags applies flags written after the positional
// arguments (urfave/cli stops parsing at the first one) and returns the
// positional arguments.
func positionalAndTrailingFlags(c *cli.Context, known map[string]bool) ([]string, error) {
	var pos []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		isBool, ok := known[name]
		if !ok {
			return nil, fmt.Errorf("flag %s: no such flag", a)
		}
		switch {
		case isBool && !hasValue:
			value = "true"
		case !hasValue:
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag %s needs a value", a)
			}
			i++
			value = args[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, fmt.Errorf("flag %s: %w", a, err)
		}
	}
	return pos, nil
}

// ParseExplainTarget parses ADDRESS[:PORT]: an IPv4 address, an IPv6
// address (bracketed when a port follows), with port 1 to 65535,
// defaulting to 443.
func ParseExplainTarget(s string) (netip.Addr, uint16, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return netip.Addr{}, 0, fmt.Errorf("address %q: port 0 is not a destination port; use 1 to 65535", s)
		}
		return ap.Addr(), ap.Port(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a, defaultExplainPort, nil
	}
	if host, port, err := net.SplitHostPort(s); err == nil {
		if _, aerr := netip.ParseAddr(host); aerr == nil {
			if _, perr := strconv.ParseUint(port, 10, 16); perr != nil || port == "" {
				return netip.Addr{}, 0, fmt.Errorf("address %q: port %q is not a number from 1 to 65535", s, port)
			}
		}
	}
	return netip.Addr{}, 0, fmt.Errorf("address %q: %w (the policy decides on addresses, not host names: resolve a name first, e.g. `getent ahostsv4 NAME`)", s, ErrExplainAddress)
}

// hostAddresses returns this host's IPv4 interface addresses and the
// connectivity helper's, which the enforcement path always drops.
func hostAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this host's addresses: %w", err)
	}
	out := append([]netip.Addr(nil), connectivityHelperAddresses...)
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// explanation is what `net explain` found.
type explanation struct {
	Destination string
	Decision    netpolicy.Decision
	Profile     string
	Digest      string
	names       bool // the policy allows host names
}

// explain derives the profile's policy and decides one destination.
func explain(cfg *config.ResolvedDomainConfiguration, hosts []netip.Addr, addr netip.Addr, port uint16, proto netpolicy.Protocol) (*explanation, error) {
	pol, _, err := netprofile.PolicyOf(cfg)
	if err != nil {
		return nil, err
	}
	digest, err := pol.Digest()
	if err != nil {
		return nil, fmt.Errorf("profile %q: network policy digest: %w", cfg.Profile(), err)
	}
	dec, err := netpolicy.Decide(pol, hosts, addr, port, proto)
	if err != nil {
		return nil, fmt.Errorf("profile %q: %w", cfg.Profile(), err)
	}
	dst := netip.AddrPortFrom(addr, port).String()
	return &explanation{Destination: dst + "/" + proto.String(), Decision: dec, Profile: cfg.Profile(), Digest: digest.String(), names: pol.HasNames()}, nil
}

func runNetExplain(c *cli.Context) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	fail := func(format string, args ...any) error {
		fmt.Fprintf(stderr, format+"\n", args...)
		return &cmdmain.ExitError{Code: netExitError}
	}
	pos, err := positionalAndTrailingFlags(c, explainFlags)
	if err != nil {
		return fail("net explain: %v", err)
	}
	if len(pos) != 1 {
		return fail("net explain: want exactly one ADDRESS[:PORT], got %d arguments", len(pos))
	}
	addr, port, err := ParseExplainTarget(pos[0])
	name := ""
	if err != nil {
		if netpolicy.CheckHostName(strings.ToLower(pos[0])) != nil {
			return fail("net explain: %v", err)
		}
		name = strings.ToLower(pos[0])
	}
	proto := netpolicy.ProtocolTCP
	if c.Bool("udp") {
		proto = netpolicy.ProtocolUDP
	}
	cfg, err := netConfig(c)
	if err != nil {
		return err
	}
	defer cfg.Close()
	hosts, err := hostAddresses()
	if err != nil {
		return fail("net explain: %v", err)
	}
	dir := control.DomainPaths(cfg.RuntimeRoot(), cfg.DomainID()).Dir
	if name != "" {
		return explainName(c, cfg, name, dir)
	}
	ex, err := explain(cfg, hosts, addr, port, proto)
	if err != nil {
		return fail("net explain: %v", err)
	}
	allowed := ex.Decision.Allowed
	if ex.names && addr == pinningResolver && port == netpolicy.DNSPort && proto != netpolicy.ProtocolICMP {
		// The input chain admits exactly this from the sandbox.
		fmt.Fprintf(stdout, "%s: allowed: DNS to the pinning resolver (the sandbox's only resolver)\nprofile %q, policy digest %s\n", ex.Destination, ex.Profile, ex.Digest)
		return nil
	}
	if err := ex.writeText(stdout); err != nil {
		return err
	}
	if !allowed && ex.names && ex.Decision.Reason == netpolicy.ReasonDefaultAction && !(port == netpolicy.DNSPort && proto != netpolicy.ProtocolICMP) {
		// An address no prefix decides is reachable while a name pins it.
		sum, err := netsidecar.ReadNameLog(control.NameLogPath(dir), time.Now(), 0)
		if err != nil {
			return fail("net explain: %v", err)
		}
		for _, p := range sum.Pins {
			if p.Address == addr.Unmap() {
				names := make([]string, len(p.Names))
				for i, n := range p.Names {
					names[i] = pinresolver.EscapeName(n)
				}
				fmt.Fprintf(stdout, "but allowed now: the running sandbox has it pinned for %.0f s more (resolved from %s)\n",
					time.Until(p.Expires).Seconds(), strings.Join(names, ", "))
				allowed = true
			}
		}
	}
	if !allowed {
		return &cmdmain.ExitError{Code: netExitDenied}
	}
	return nil
}

// explainName says whether the pinning resolver answers name, which rule
// decides, and which of its addresses the running sandbox has pinned.
func explainName(c *cli.Context, cfg *config.ResolvedDomainConfiguration, name, dir string) error {
	stdout := c.App.Writer
	pol, _, err := netprofile.PolicyOf(cfg)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "net explain: %v\n", err)
		return &cmdmain.ExitError{Code: netExitError}
	}
	if !pol.HasNames() {
		fmt.Fprintf(stdout, "%s: refused: profile %q allows no host names (allow_hosts); its sandbox resolves names through %s only\n",
			name, cfg.Profile(), resolverList(pol))
		return &cmdmain.ExitError{Code: netExitDenied}
	}
	d := pol.DecideName(name)
	fmt.Fprintf(stdout, "%s: %s\n", name, d)
	if !d.Allowed {
		return &cmdmain.ExitError{Code: netExitDenied}
	}
	if pol.IsBrokered(name) {
		var ports []string
		for _, b := range pol.Brokered {
			if b.Host == name {
				ports = append(ports, strconv.Itoa(int(b.Port)))
			}
		}
		fmt.Fprintf(stdout, "brokered: the pinning resolver answers it with the credential broker's address (%s), which takes TCP port %s and sends the profile's credentials for it only there; nothing is pinned\n",
			netpath.DefaultLink.Addr().Next(), strings.Join(ports, ", "))
		return nil
	}
	fmt.Fprintf(stdout, "its A records are forwarded to %s; each address is pinned for the record's TTL (raised to 10 s, at most 1 h, plus 2 s) unless a deny prefix, a private or structural range or a host address covers it\n", pol.NameUpstream)
	sum, err := netsidecar.ReadNameLog(control.NameLogPath(dir), time.Now(), 0)
	if err == nil {
		for _, p := range sum.Pins {
			if slices.Contains(p.Names, name) {
				fmt.Fprintf(stdout, "pinned now: %s for %.0f s more\n", p.Address, time.Until(p.Expires).Seconds())
			}
		}
	}
	return nil
}

func resolverList(p *netpolicy.DerivedNetworkPolicy) string {
	var out []string
	for _, r := range p.Resolvers {
		out = append(out, r.Address.String())
	}
	return strings.Join(out, ", ")
}

func (e *explanation) writeText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s: %s\nprofile %q, policy digest %s\n", e.Destination, e.Decision, e.Profile, e.Digest)
	return err
}

// netConfig resolves the configuration of --config, --profile and
// --workspace for the net subcommands. Problems are printed; the error
// is the exit status.
func netConfig(c *cli.Context) (*config.ResolvedDomainConfiguration, error) {
	cfg, _, err := resolveDomain(c, netExitError)
	return cfg, err
}

// runNetLog prints the running Domain's name log: the refusals, or with
// --all every record.
func runNetLog(c *cli.Context) error {
	stdout := c.App.Writer
	if c.Args().Len() != 0 {
		fmt.Fprintf(c.App.ErrWriter, "net log: unexpected arguments %q\n", c.Args().Slice())
		return &cmdmain.ExitError{Code: netExitError}
	}
	cfg, err := netConfig(c)
	if err != nil {
		return err
	}
	defer cfg.Close()
	path := control.NameLogPath(control.DomainPaths(cfg.RuntimeRoot(), cfg.DomainID()).Dir)
	recs, err := netsidecar.ReadNameLogRecords(path)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "net log: %v\n", err)
		return &cmdmain.ExitError{Code: netExitError}
	}
	enc := json.NewEncoder(stdout)
	shown := 0
	for _, r := range recs {
		if !c.Bool("all") && r.Kind != "refused" && r.Kind != "rebinding" && r.Kind != netsidecar.BrokerRefused {
			continue
		}
		shown++
		r.Name = pinresolver.EscapeName(r.Name)
		if c.Bool("json") {
			if err := enc.Encode(r); err != nil {
				return err
			}
			continue
		}
		line := r.Time.UTC().Format(time.RFC3339) + " " + r.Kind
		if r.Name != "" {
			line += " " + r.Name
		}
		line += brokerDetail(r)
		for i, a := range r.Addresses {
			if i == 0 {
				line += " ->"
			}
			line += " " + a.String()
		}
		if r.TTLMillis > 0 {
			line += fmt.Sprintf(" for %s", (time.Duration(r.TTLMillis) * time.Millisecond).String())
		}
		if r.Reason != "" {
			q := strconv.QuoteToASCII(r.Reason)
			line += ": " + q[1:len(q)-1]
		}
		fmt.Fprintln(stdout, line)
	}
	if shown == 0 && !c.Bool("json") {
		what := "no name was refused"
		if c.Bool("all") {
			what = "no name was resolved"
		}
		fmt.Fprintf(stdout, "%s (%s)\n", what, path)
	}
	return nil
}

// brokerDetail renders the credential broker's fields of a name log
// record (empty for the resolver's records): port, method, credentials
// and status, each escaped.
func brokerDetail(r netsidecar.NameLogRecord) string {
	var b strings.Builder
	if r.Port != 0 {
		fmt.Fprintf(&b, ":%d", r.Port)
	}
	if r.Method != "" {
		q := strconv.QuoteToASCII(r.Method)
		b.WriteString(" " + q[1:len(q)-1])
	}
	if len(r.Credentials) > 0 {
		q := strconv.QuoteToASCII(strings.Join(r.Credentials, ","))
		b.WriteString(" credentials " + q[1:len(q)-1])
	}
	if r.Status != 0 {
		fmt.Fprintf(&b, " status %d", r.Status)
	}
	return b.String()
}

// brokerRefusals prints the credential broker's refusals in the running
// generation's name log in dir, one line each, under a heading; nothing
// when there are none or no log.
func brokerRefusals(w io.Writer, dir string) error {
	recs, err := netsidecar.ReadNameLogRecords(control.NameLogPath(dir))
	if err != nil {
		return nil // no running generation, or no names: nothing to add
	}
	var b strings.Builder
	for _, r := range recs {
		if r.Kind != netsidecar.BrokerRefused {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("credential broker refusals in the running generation:\n")
		}
		line := "  " + r.Time.UTC().Format(time.RFC3339) + " refused " + pinresolver.EscapeName(r.Name) + brokerDetail(r)
		if r.Reason != "" {
			q := strconv.QuoteToASCII(r.Reason)
			line += ": " + q[1:len(q)-1]
		}
		b.WriteString(line + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}
