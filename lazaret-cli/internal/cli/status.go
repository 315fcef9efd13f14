package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the Domains under the runtime and storage roots: lock, coordinator, publication, generations, participants, sessions (read-only)",
		Description: "Lists every Domain under the runtime root and the storage root (--storage-root, else the\n" +
			"configuration's storage.data_root, else the default), or with --profile only that profile's.",
		Flags: []cli.Flag{
			configFileFlag(),
			storageRootFlag(),
			profileFlag(),
			jsonFlag("one object"),
		},
		Action: runStatus,
	}
}

type statusReport struct {
	RuntimeRoot string                 `json:"runtime_root"`
	StorageRoot string                 `json:"storage_root"`
	Domains     []session.DomainStatus `json:"domains"`
}

func runStatus(c *cli.Context) error {
	if c.Args().Present() {
		return failCode(c, 1, "status takes no arguments, got %q", c.Args().First())
	}
	r, err := resolveRoots(c, 1)
	if err != nil {
		return err
	}
	storage, runtime := r.StorageRoot, r.RuntimeRoot
	all, err := session.Status(runtime, storage)
	if err != nil {
		return err
	}
	// A filter, not a default: without --profile, status shows every
	// Domain, those of profiles the configuration no longer declares too.
	domains := all
	if p := c.String("profile"); p != "" {
		domains = []session.DomainStatus{}
		for _, d := range all {
			if d.Profile == p {
				domains = append(domains, d)
			}
		}
	}
	rep := statusReport{RuntimeRoot: runtime, StorageRoot: storage, Domains: domains}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, rep)
	}
	return rep.writeText(c.App.Writer)
}

func (r *statusReport) writeText(w io.Writer) error {
	var b strings.Builder
	if len(r.Domains) == 0 {
		fmt.Fprintf(&b, "no Domains under %s or %s\n", r.RuntimeRoot, r.StorageRoot)
	}
	for i, d := range r.Domains {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "Domain %s\n", d.DomainID)
		if d.Profile != "" {
			fmt.Fprintf(&b, "  profile:     %s\n", d.Profile)
		}
		if d.Workspace != "" {
			fmt.Fprintf(&b, "  workspace:   %s\n", d.Workspace)
		}
		lock := d.Lock
		if len(d.CoordinatorPIDs) > 0 {
			lock += fmt.Sprintf(" by lazaret-coordinator pid %s", joinInts(d.CoordinatorPIDs))
		}
		fmt.Fprintf(&b, "  lock:        %s\n", lock)
		switch {
		case d.Published != nil:
			fmt.Fprintf(&b, "  published:   generation %s, fingerprint %s\n", d.Published.GenerationID, d.Published.Fingerprint)
		case d.PublicationError != "":
			fmt.Fprintf(&b, "  published:   unreadable identity file: %s\n", d.PublicationError)
		default:
			fmt.Fprintf(&b, "  published:   no\n")
		}
		switch {
		case d.Network != nil:
			n := d.Network
			fmt.Fprintf(&b, "  network:     policy %s: IPv4 %s, IPv6 %s, default deny\n", n.PolicyDigest, n.IPv4, n.IPv6)
			fmt.Fprintf(&b, "               allow %s\n", orNone(n.Allow))
			fmt.Fprintf(&b, "               deny  %s\n", orNone(n.Deny))
			fmt.Fprintf(&b, "               DNS only to %s\n", orNone(n.Resolvers))
			if len(n.AllowHosts) > 0 {
				fmt.Fprintf(&b, "               hosts allowed %s\n", strings.Join(n.AllowHosts, ", "))
				fmt.Fprintf(&b, "               hosts denied  %s\n", orNone(n.DenyHosts))
				fmt.Fprintf(&b, "               names resolved through the pinning resolver, upstream %s\n", n.NameUpstream)
				writeCredentials(&b, n, "               ")
				writeNames(&b, n, "               ")
			}
		case d.NetworkError != "":
			fmt.Fprintf(&b, "  network:     unreadable policy file: %s\n", d.NetworkError)
		}
		for i, p := range d.Ports {
			label := "  ports:       "
			if i > 0 {
				label = "               "
			}
			fmt.Fprintf(&b, "%s%s -> sandbox port %d (tcp)\n", label, p.Host, p.SandboxPort)
		}
		if d.PortsError != "" {
			fmt.Fprintf(&b, "  ports:       unreadable record: %s\n", d.PortsError)
		}
		switch d.Store {
		case session.StoreInUse:
			fmt.Fprintf(&b, "  store:       %s in use by the running coordinator; its records are not shown while it runs\n", d.StorePath)
		case session.StoreError:
			fmt.Fprintf(&b, "  store:       %s unreadable: %s\n", d.StorePath, d.StoreError)
		default:
			fmt.Fprintf(&b, "  store:       %s (%s)\n", d.StorePath, d.Store)
		}
		for _, g := range d.Generations {
			fmt.Fprintf(&b, "  generation %s: %s\n", g.GenerationID, g.Phase)
			for _, p := range g.Participants {
				fmt.Fprintf(&b, "    participant %-13s %s\n", p.Role, p.State)
			}
			for _, s := range g.Sessions {
				term := ""
				if s.Terminal != "" {
					term = ", terminal " + s.Terminal
				}
				fmt.Fprintf(&b, "    session %s: %s (CLI %s%s)\n", s.SessionID, s.Phase, s.CLIID, term)
			}
		}
		switch d.Audit {
		case session.AuditRefusing:
			fmt.Fprintf(&b, "  audit log:   %s refusing escalation requests: %s\n", d.AuditLog, d.AuditError)
		case session.AuditAccepting:
			fmt.Fprintf(&b, "  audit log:   %s (accepting requests)\n", d.AuditLog)
		}
		if d.CoordinatorLog != "" {
			fmt.Fprintf(&b, "  log:         %s\n", d.CoordinatorLog)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ", ")
}

// writeNames prints the pins and the recent refusals of a policy with
// names, each line prefixed by indent. Names arrive escaped.
func writeNames(b *strings.Builder, n *session.NetworkStatus, indent string) {
	if n.NameLogError != "" {
		fmt.Fprintf(b, "%sname log unreadable: %s\n", indent, n.NameLogError)
		return
	}
	if len(n.Pins) == 0 {
		fmt.Fprintf(b, "%spinned: none\n", indent)
	}
	for _, p := range n.Pins {
		fmt.Fprintf(b, "%spinned %s for %.0f s more (%s)\n", indent, p.Address, p.RemainingSeconds, strings.Join(p.Names, ", "))
	}
	if len(n.Refusals) == 0 {
		fmt.Fprintf(b, "%srefused: none\n", indent)
	}
	for _, r := range n.Refusals {
		line := fmt.Sprintf("%s%s %s %s", indent, r.Time, r.Kind, r.Name)
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		fmt.Fprintln(b, line)
	}
}

// writeCredentials prints the credentials the broker holds: the sandbox
// variable, where its value goes, and to which destinations. The record
// is the coordinator's, but is printed escaped all the same.
func writeCredentials(b *strings.Builder, n *session.NetworkStatus, indent string) {
	if n.CredentialsError != "" {
		fmt.Fprintf(b, "%scredentials record unreadable: %s\n", indent, n.CredentialsError)
	}
	for _, c := range n.Credentials {
		where := c.Scheme
		switch c.Scheme {
		case "header":
			where = "header " + c.Header
		case "bearer":
			where = "Authorization: Bearer"
		case "basic":
			where = "Authorization: Basic (password)"
		}
		fmt.Fprintf(b, "%scredential %s brokered (%s) only to %s; the sandbox holds a placeholder\n",
			indent, quoted(c.Name), quoted(where), quoted(strings.Join(c.Destinations, ", ")))
	}
}

// quoted escapes every byte outside printable ASCII.
func quoted(s string) string {
	q := strconv.QuoteToASCII(s)
	return q[1 : len(q)-1]
}
