package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The deep check runs in a child process: the running executable
// re-executed with argv[0] checkerArg0 and checkerEnv set. bbolt trusts its
// pages; a damaged branch page makes it panic in a goroutine the caller
// cannot recover, a short mapping makes it fault, a cyclic page graph makes
// it recurse without bound. None of that may take down the process that
// asked (a Host Coordinator), so the pages are first walked by a process
// whose only job is to report.
const (
	checkerArg0 = "lazaret-store-check"
	checkerEnv  = "LAZARET_STORE_CHECK"
	checkerTag  = "v1"
	// checkerOutputLimit bounds what the parent reads from the child.
	checkerOutputLimit = 64 << 10
)

func init() {
	if os.Getenv(checkerEnv) != checkerTag || len(os.Args) != 5 || os.Args[0] != checkerArg0 {
		return
	}
	os.Exit(checkerMain(os.Args[1:]))
}

// checkReport is the child's answer on stdout.
type checkReport struct {
	Result        string `json:"result"` // ok, damaged, locked, schema, missing, error
	Detail        string `json:"detail,omitempty"`
	Metadata      []byte `json:"metadata,omitempty"`
	MetadataFound bool   `json:"metadata_found"`
}

// checkerMain runs in the child: args are path, schema ID, schema version,
// lock timeout in milliseconds.
func checkerMain(args []string) int {
	ver, err1 := strconv.ParseUint(args[2], 10, 64)
	ms, err2 := strconv.ParseInt(args[3], 10, 64)
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "lazaret-store-check: malformed arguments")
		return 2
	}
	rep := checkFile(args[0], Schema{ID: args[1], Version: ver}, time.Duration(ms)*time.Millisecond)
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// checkFile is the child's work: a read-only open, the metadata gate, then
// bbolt's full page check. Rows are read only after the metadata matched.
func checkFile(path string, want Schema, lockTimeout time.Duration) checkReport {
	db, err := bolt.Open(path, 0, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return checkReport{Result: "locked"}
		case errors.Is(err, os.ErrNotExist):
			return checkReport{Result: "missing"}
		case errors.Is(err, os.ErrPermission):
			return checkReport{Result: "error", Detail: err.Error()}
		}
		return checkReport{Result: "damaged", Detail: "bbolt refuses to open it: " + err.Error()}
	}
	defer db.Close()
	var rep checkReport
	err = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(metadataBucket); b != nil {
			if v := b.Get(metadataKey); v != nil {
				rep.MetadataFound = true
				rep.Metadata = bytes.Clone(v)
			}
		}
		if serr := compareMetadata(path, rep.Metadata, want); serr != nil {
			rep.Result = "schema"
			return nil
		}
		var problems []string
		// Drain the channel completely: the checking goroutine holds the
		// transaction until it has sent every finding.
		for cerr := range tx.Check() {
			if len(problems) < 5 {
				problems = append(problems, cerr.Error())
			}
		}
		if len(problems) > 0 {
			rep.Result = "damaged"
			rep.Detail = "page check failed: " + strings.Join(problems, "; ")
			return nil
		}
		rep.Result = "ok"
		return nil
	})
	if err != nil {
		return checkReport{Result: "damaged", Detail: err.Error()}
	}
	return rep
}

// deepCheck runs checkFile in a child process and turns its report into an
// error: nil, *DamageError, *SchemaError, ErrLocked or ErrNotFound. A child
// that crashes, is killed or overruns timeout reports damage: a healthy
// store cannot make bbolt crash.
func deepCheck(path string, want Schema, lockTimeout, timeout time.Duration) error {
	deepChecks.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe", path, want.ID, strconv.FormatUint(want.Version, 10),
		strconv.FormatInt(lockTimeout.Milliseconds(), 10))
	cmd.Args[0] = checkerArg0
	cmd.Env = []string{checkerEnv + "=" + checkerTag, "GOTRACEBACK=single"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr limitedBuffer
	stdout.limit, stderr.limit = checkerOutputLimit, checkerOutputLimit
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return &DamageError{Path: path, Reason: fmt.Sprintf("the page check did not finish within %v", timeout)}
	}
	var rep checkReport
	if runErr != nil || json.Unmarshal(stdout.Bytes(), &rep) != nil {
		var ee *exec.ExitError
		if runErr != nil && !errors.As(runErr, &ee) {
			return fmt.Errorf("starting store checker for %q: %w", path, runErr)
		}
		return &DamageError{Path: path, Reason: "reading it crashed the page checker: " + lastLine(stderr.String())}
	}
	switch rep.Result {
	case "ok":
		return nil
	case "locked":
		return fmt.Errorf("store file %q: %w (lock not obtained within %v)", path, ErrLocked, lockTimeout)
	case "missing":
		return fmt.Errorf("store file %q: %w", path, ErrNotFound)
	case "schema":
		var raw []byte
		if rep.MetadataFound {
			raw = rep.Metadata
		}
		if err := compareMetadata(path, raw, want); err != nil {
			return err
		}
		return fmt.Errorf("store checker for %q reported a schema mismatch that the metadata does not show", path)
	case "damaged":
		return &DamageError{Path: path, Reason: rep.Detail}
	default:
		return fmt.Errorf("checking store file %q: %s", path, rep.Detail)
	}
}

// limitedBuffer keeps at most limit bytes and discards the rest.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// lastLine returns the most telling line of a crash report: the first line
// starting with "panic:" or "fatal error:" or "unexpected fault", else the
// last non-empty line.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "unexpected fault") {
			return strings.TrimSpace(l)
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return "no diagnostic output"
}
