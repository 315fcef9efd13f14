package netsidecar

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"
)

// PinGrace is added to every pin beyond the TTL the pinning resolver
// answers with: a client caches an answer for its TTL from when it
// arrives, a moment after the pin began, and must not find the address
// closed while its cache still names it.
const PinGrace = 2 * time.Second

// NameLogLimit bounds the name log. The sandbox chooses how many queries
// it sends, so the log cannot grow with them: when a record would pass
// the limit, the log starts over with a snapshot of the pins the kernel
// holds, so that what status shows stays true.
const NameLogLimit = 4 << 20

// Kinds of name log records besides the resolver's event kinds
// (pinned, refused, rebinding, upstream, malformed, unpinned,
// pin-failed, brokered).
const (
	// NameLogSnapshot lists every pin held when the log started over.
	NameLogSnapshot = "snapshot"
	// BrokerBrokered: the credential broker forwarded a request with a
	// credential's real value in place of its placeholder.
	BrokerBrokered = "broker-brokered"
	// BrokerRefused: the credential broker refused a connection or a
	// request; Reason says why.
	BrokerRefused = "broker-refused"
)

// NameLogRecord is one line of the name log: JSON, one object per line.
// Name is the query name as the sandbox sent it (lowercased); it is
// sandbox data, and a reader escapes it before printing.
type NameLogRecord struct {
	Time      time.Time    `json:"time"`
	Kind      string       `json:"kind"`
	Name      string       `json:"name,omitempty"`
	Rule      string       `json:"rule,omitempty"`
	Addresses []netip.Addr `json:"addresses,omitempty"`
	// TTLMillis is how long the addresses are pinned from Time.
	TTLMillis int64     `json:"ttl_ms,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Pins      []NamePin `json:"pins,omitempty"`
	// Port, Credentials, Method and Status belong to the credential
	// broker's records (BrokerBrokered, BrokerRefused): Name is then the
	// destination host (the TLS server name the sandbox sent), and
	// Credentials the names of the sandbox variables substituted or
	// involved. No record holds a credential's value or placeholder.
	Port        uint16   `json:"port,omitempty"`
	Credentials []string `json:"credentials,omitempty"`
	Method      string   `json:"method,omitempty"`
	Status      int      `json:"status,omitempty"`
}

// NamePin is one pinned address and when its pin ends.
type NamePin struct {
	Address netip.Addr `json:"address"`
	Expires time.Time  `json:"expires"`
}

// NameLog writes the name log to a file the coordinator opened for the
// sidecar (append only). Safe for concurrent use.
type NameLog struct {
	mu       sync.Mutex
	f        *os.File
	size     int64
	limit    int64
	snapshot func() []NamePin
}

// NewNameLog writes records to f, starting over past limit (NameLogLimit
// when zero) with snapshot's pins.
func NewNameLog(f *os.File, limit int64, snapshot func() []NamePin) *NameLog {
	if limit <= 0 {
		limit = NameLogLimit
	}
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	return &NameLog{f: f, size: size, limit: limit, snapshot: snapshot}
}

// Write appends r. A write error is returned and the log keeps going.
func (l *NameLog) Write(r NameLogRecord) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size+int64(len(line)) > l.limit {
		if err := l.f.Truncate(0); err != nil {
			return fmt.Errorf("starting the name log over: %w", err)
		}
		l.size = 0
		snap := NameLogRecord{Time: time.Now(), Kind: NameLogSnapshot}
		if l.snapshot != nil {
			snap.Pins = l.snapshot()
		}
		b, err := json.Marshal(snap)
		if err != nil {
			return err
		}
		n, err := l.f.Write(append(b, '\n'))
		l.size += int64(n)
		if err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	l.size += int64(n)
	return err
}

// NameSummary is what a name log says now: the pins still held, and the
// most recent refusals, newest last.
type NameSummary struct {
	Pins     []NameSummaryPin
	Refusals []NameLogRecord
	// Records is how many records the log holds.
	Records int
}

// NameSummaryPin is a pinned address with the names that pinned it.
type NameSummaryPin struct {
	Address netip.Addr
	Expires time.Time
	Names   []string
}

// ReadNameLogRecords reads every record of the name log at path, oldest
// first. A missing log has none. Lines that do not parse are skipped: the
// writer may be mid-line.
func ReadNameLogRecords(path string) ([]NameLogRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening the name log: %w", err)
	}
	defer f.Close()
	var out []NameLogRecord
	sc := bufio.NewScanner(io.LimitReader(f, 2*NameLogLimit))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r NameLogRecord
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the name log %s: %w", path, err)
	}
	return out, nil
}

// ReadNameLog summarises the name log at path as of now, keeping the last
// maxRefusals refusals (refused names and rebinding attempts).
func ReadNameLog(path string, now time.Time, maxRefusals int) (*NameSummary, error) {
	recs, err := ReadNameLogRecords(path)
	if err != nil {
		return nil, err
	}
	pins := map[netip.Addr]*NameSummaryPin{}
	sum := &NameSummary{Records: len(recs)}
	for _, r := range recs {
		switch r.Kind {
		case NameLogSnapshot:
			for _, p := range r.Pins {
				pin(pins, p.Address, p.Expires, "")
			}
		case "pinned":
			for _, a := range r.Addresses {
				pin(pins, a, r.Time.Add(time.Duration(r.TTLMillis)*time.Millisecond), r.Name)
			}
		case "refused", "rebinding", BrokerRefused:
			sum.Refusals = append(sum.Refusals, r)
			if len(sum.Refusals) > maxRefusals {
				sum.Refusals = sum.Refusals[1:]
			}
		}
	}
	for _, p := range pins {
		if p.Expires.After(now) {
			slices.Sort(p.Names)
			sum.Pins = append(sum.Pins, *p)
		}
	}
	slices.SortFunc(sum.Pins, func(a, b NameSummaryPin) int { return a.Address.Compare(b.Address) })
	return sum, nil
}

func pin(pins map[netip.Addr]*NameSummaryPin, a netip.Addr, exp time.Time, name string) {
	p, ok := pins[a]
	if !ok {
		p = &NameSummaryPin{Address: a}
		pins[a] = p
	}
	if exp.After(p.Expires) {
		p.Expires = exp
	}
	if name != "" && !slices.Contains(p.Names, name) {
		p.Names = append(p.Names, name)
	}
}
