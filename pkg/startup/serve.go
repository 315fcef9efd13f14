package startup

import (
	"fmt"
	"os"
	"time"

	"lazaret.dev/pkg/handoff"
)

// DefaultLinger is how long a coordinator keeps a Domain with no session
// when --linger is not given.
const DefaultLinger = 10 * time.Second

// Flag and descriptor names of `lazaret-coordinator serve`.
const (
	flagConfig      = "config"
	flagProfile     = "profile"
	flagWorkspace   = "workspace"
	flagFingerprint = "fingerprint"
	flagLinger      = "linger"
	flagSession     = "session"
	flagRecoverOnly = "recover-only"

	fileLock   = "domain-lock"
	fileReport = "start-report"
)

// ServeLayout is the command line and descriptors of `lazaret-coordinator
// serve`: descriptor 3 is the Domain lock, descriptor 4 the start report.
var ServeLayout = handoff.Layout{
	Child:   "lazaret-coordinator serve",
	Command: []string{"serve"},
	Flags: []handoff.Flag{
		{Name: flagConfig, Required: true},
		{Name: flagProfile, Required: true},
		{Name: flagWorkspace, Required: true},
		{Name: flagFingerprint, Required: true},
		{Name: flagLinger},
		{Name: flagRecoverOnly, Switch: true},
		{Name: flagSession},
	},
	Files: []string{fileLock, fileReport},
}

// Serve is what lazaret-cli hands the coordinator it starts.
type Serve struct {
	// ConfigFile is the trusted host configuration file.
	ConfigFile string
	// Profile is the selected profile.
	Profile string
	// Workspace is the canonical git workspace.
	Workspace string
	// Fingerprint is the configuration fingerprint the CLI resolved (64
	// hex digits).
	Fingerprint string
	// Linger is how long to stay up with no session running (0: stop
	// after the last).
	Linger time.Duration
	// RecoverOnly makes the coordinator recover what an earlier one left,
	// report ready and exit without starting a generation.
	RecoverOnly bool
	// Session is the session of the CLI that starts this generation (32
	// hex digits), "" for none.
	Session string

	// Lock is the Domain lock file, held (flock LOCK_EX) by the CLI.
	Lock *os.File
	// Report is the write end of the start report pipe.
	Report *os.File
}

// Argv is the coordinator's command line after its executable.
func (s *Serve) Argv() ([]string, error) {
	v := handoff.Values{
		flagConfig:      s.ConfigFile,
		flagProfile:     s.Profile,
		flagWorkspace:   s.Workspace,
		flagFingerprint: s.Fingerprint,
		flagLinger:      s.Linger.String(),
	}
	if s.RecoverOnly {
		v[flagRecoverOnly] = "true"
	}
	if s.Session != "" {
		v[flagSession] = s.Session
	}
	return ServeLayout.Argv(v, nil)
}

// ExtraFiles is exec.Cmd.ExtraFiles for the coordinator: Lock and Report.
func (s *Serve) ExtraFiles() ([]*os.File, error) {
	return ServeLayout.ExtraFiles(map[string]*os.File{fileLock: s.Lock, fileReport: s.Report})
}

// ParseServe parses the flags of `serve` (what follows the word). Lock
// and Report stay nil: Inherit takes them.
func ParseServe(args []string) (Serve, error) {
	v, _, err := ServeLayout.Parse(args)
	if err != nil {
		return Serve{}, err
	}
	s := Serve{
		ConfigFile:  v[flagConfig],
		Profile:     v[flagProfile],
		Workspace:   v[flagWorkspace],
		Fingerprint: v[flagFingerprint],
		Linger:      DefaultLinger,
		RecoverOnly: v[flagRecoverOnly] == "true",
		Session:     v[flagSession],
	}
	if l, ok := v[flagLinger]; ok {
		if s.Linger, err = time.ParseDuration(l); err != nil {
			return Serve{}, fmt.Errorf("%s: --%s %q: %w", ServeLayout.Child, flagLinger, l, handoff.ErrArgs)
		}
	}
	return s, nil
}

// Inherit takes Lock and Report from this process's descriptors, both
// close-on-exec: the lock must end with the coordinator, not with a
// helper it starts.
func (s *Serve) Inherit() error {
	files, err := ServeLayout.Inherit()
	if err != nil {
		return err
	}
	s.Lock, s.Report = files[fileLock], files[fileReport]
	return nil
}
