package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"lazaret.dev/pkg/audit"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/loglimit"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// mailboxName is the mailbox root's name in the control directory
// (/run/lazaret/mailbox in the sandbox).
const mailboxName = "mailbox"

// Errors of prompt routing.
var (
	// ErrNoTerminal means the requesting session has no interactive
	// terminal that could show an escalation prompt.
	ErrNoTerminal = errors.New("the requesting session has no interactive terminal to show the prompt")
	// ErrNoPrompt means a decision arrived while no prompt was shown.
	ErrNoPrompt = errors.New("no escalation prompt is pending in this session")
)

// hostEscalation is a generation's escalation engine with the routes of
// its prompts: each prompt goes to the interactive session whose
// capability signed the request, and that session's signed decision goes
// back to the engine. Every transition is appended to the Domain's audit
// log.
type hostEscalation struct {
	engine        *escalation.Engine
	outbox, inbox *mailbox.Dir
	audit         *audit.Writer
	log           *slog.Logger
	limiter       *loglimit.Limiter
	// refusingPath is audit.RefusingName in the Domain's runtime
	// directory, present while the audit log refuses requests.
	refusingPath string
	refusedMu    sync.Mutex
	refused      string // the reason in refusingPath, "" when absent
	cancel       context.CancelFunc
	served       chan struct{}
	stopOnce     sync.Once

	mu       sync.Mutex
	bindings map[ids.SessionID]protocol.SessionBinding
	routes   map[ids.SessionID]*promptRoute
}

// promptRoute carries the prompts and decisions of one interactive
// session.
type promptRoute struct {
	prompts   chan protocol.TerminalPrompt
	decisions chan protocol.SignedProtocolRecord
	gone      chan struct{}
	goneOnce  sync.Once

	mu      sync.Mutex
	pending bool
}

// startEscalation creates the mailbox in the control directory, opens the
// Domain's audit log next to its Domain Store, and starts the engine with
// the profile's auto-approval rules and the workspace as the working
// directory of host commands. A profile with escalation disabled gets
// none of them: a guest request then finds no mailbox. An audit log that
// cannot be opened (unsafe file, broken chain, another writer) fails the
// start: requests would otherwise run unrecorded, or be appended to a
// chain that no reader gets past.
func startEscalation(s *scope, t *trustAnchor) error {
	if !s.cfg.EscalationEnabled() {
		return nil
	}
	root := filepath.Join(s.controlDir(), mailboxName)
	if err := mailbox.Create(root, 0o700); err != nil {
		return err
	}
	verifier, err := protocol.NewVerifier(t.manifest, t.manifest.Digest(), t.coordinator, t.sandbox)
	if err != nil {
		return fmt.Errorf("building the mailbox verifier: %w", err)
	}
	auditPath := audit.Path(s.cfg.StorageRoot(), s.domain)
	aw, err := audit.Open(auditPath)
	if err != nil {
		return fmt.Errorf("opening the escalation audit log: %w", err)
	}
	// Every line the sandbox can cause at will (discarded mailbox files
	// and records, refused requests) goes through one limiter of the
	// generation.
	limiter := loglimit.New(s.log.Handler(), 0, 0)
	noisy := limiter.Logger()
	h := &hostEscalation{
		refusingPath: filepath.Join(s.paths.Dir, audit.RefusingName),
		limiter:      limiter,
		audit:        aw,
		log:          s.log,
		served:       make(chan struct{}),
		bindings:     map[ids.SessionID]protocol.SessionBinding{},
		routes:       map[ids.SessionID]*promptRoute{},
	}
	if h.outbox, err = mailbox.OpenDir(root, mailbox.Outbox, noisy); err != nil {
		aw.Close()
		return err
	}
	if h.inbox, err = mailbox.OpenDir(root, mailbox.Inbox, noisy); err != nil {
		h.outbox.Close()
		aw.Close()
		return err
	}
	h.engine, err = escalation.New(escalation.Config{
		Verifier:       verifier,
		CoordinatorKey: t.coordinatorKey,
		Sessions:       h.lookup,
		Rules:          s.cfg.AutoApprovalRules(),
		Timeouts:       s.escalationTimeouts,
		Prompter:       h,
		Outbox:         h.outbox,
		Inbox:          h.inbox,
		Workspace:      s.cfg.Workspace(),
		UID:            os.Getuid(),
		Logger:         s.log,
		Noisy:          noisy,
		// Fail closed: a request is admitted only when the audit log can
		// take every record of it (audit.Writer.Admit: a working Writer,
		// its reserve allocated, free space on its file system), and a
		// command runs only once its records up to Executing are durable.
		// Every record is written at once; the engine marks the ones
		// that must be durable before it acts (the prompt, the command's
		// start, the result), and each of those is one fsync covering
		// the records before it.
		Journal: func(ev escalation.Event) error {
			if ev.Phase == escalation.PhaseVerified {
				if err := aw.Admit(); err != nil {
					// The sandbox can send requests at will while
					// the file system stays full: a line per request
					// goes through the limiter.
					noisy.Error("refusing an escalation request: the audit log cannot record it", "path", fmt.Sprintf("%q", auditPath),
						"request", ev.Request.String(), "err", err.Error())
					h.refusing(err)
					return err
				}
			}
			put := aw.Write
			if ev.Durable {
				put = aw.Append
			}
			if err := put(audit.FromEvent(s.id, time.Now(), ev)); err != nil {
				noisy.Error("writing the escalation audit log", "path", fmt.Sprintf("%q", auditPath),
					"request", ev.Request.String(), "phase", string(ev.Phase), "err", err.Error())
				h.refusing(err)
				return err
			}
			if ev.Phase == escalation.PhaseVerified {
				h.refusing(nil)
			}
			return nil
		},
		OnEvent: func(ev escalation.Event) {
			args := []any{"session", ev.Session.String(), "request", ev.Request.String(), "phase", string(ev.Phase),
				"source", string(ev.Source), "rule", ev.Rule, "argv", fmt.Sprintf("%q", ev.Argv)}
			if ev.ExitCode != nil {
				args = append(args, "exit_code", int(*ev.ExitCode))
			}
			if ev.Err != nil {
				args = append(args, "reason", ev.Err.Error())
			}
			log := s.log
			if ev.Phase == escalation.PhaseRefused {
				log = noisy
			}
			log.Info("escalation", args...)
			s.trace.escalation(ev)
		},
	})
	if err != nil {
		h.outbox.Close()
		h.inbox.Close()
		aw.Close()
		return fmt.Errorf("starting the escalation engine: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.served)
		if err := h.engine.Serve(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("escalation mailbox watcher stopped", "err", err.Error())
		}
	}()
	t.escalation = h
	s.log.Info("escalation engine started", "mailbox", root, "rules", len(s.cfg.AutoApprovalRules()), "audit_log", auditPath)
	return nil
}

// stop ends the outbox watcher, cancels every live request (killing host
// commands), and closes the mailbox directories and then the audit log,
// once the engine can report no more events. Safe on nil and twice.
func (h *hostEscalation) stop() {
	if h == nil {
		return
	}
	h.stopOnce.Do(func() {
		h.cancel()
		<-h.served
		h.engine.Close()
		h.refusing(nil)
		h.limiter.Flush(context.Background())
		h.outbox.Close()
		h.inbox.Close()
		if err := h.audit.Close(); err != nil {
			h.log.Error("closing the escalation audit log", "path", fmt.Sprintf("%q", h.audit.Path()), "err", err.Error())
		}
	})
}

// bind records a registered session's binding for the verifier.
func (h *hostEscalation) bind(b protocol.SessionBinding) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.bindings[b.SessionID] = b
	h.mu.Unlock()
}

func (h *hostEscalation) lookup(id ids.SessionID) (protocol.SessionBinding, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.bindings[id]
	return b, ok
}

// attach opens the prompt route of an interactive session; nil when
// escalation is disabled.
func (h *hostEscalation) attach(id ids.SessionID) *promptRoute {
	if h == nil {
		return nil
	}
	r := &promptRoute{
		prompts:   make(chan protocol.TerminalPrompt),
		decisions: make(chan protocol.SignedProtocolRecord, 1),
		gone:      make(chan struct{}),
	}
	h.mu.Lock()
	if old := h.routes[id]; old != nil {
		old.close()
	}
	h.routes[id] = r
	h.mu.Unlock()
	return r
}

// refusing records for status whether the audit log refuses requests:
// err's text in audit.RefusingName of the runtime directory (which is not
// on the storage root's file system), or no file when err is nil. It
// writes only when the state changes.
func (h *hostEscalation) refusing(err error) {
	reason := ""
	if err != nil {
		reason = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	h.refusedMu.Lock()
	defer h.refusedMu.Unlock()
	if reason == h.refused {
		return
	}
	var werr error
	if reason == "" {
		if werr = os.Remove(h.refusingPath); errors.Is(werr, fs.ErrNotExist) {
			werr = nil
		}
	} else {
		tmp := h.refusingPath + ".tmp"
		if werr = os.WriteFile(tmp, []byte(reason+"\n"), 0o600); werr == nil {
			werr = os.Rename(tmp, h.refusingPath)
		}
	}
	if werr != nil {
		h.log.Error("recording the audit log's state for status", "path", fmt.Sprintf("%q", h.refusingPath), "err", werr.Error())
		return
	}
	h.refused = reason
}

// endSession ends a session for the engine: its capability stops
// working and its active request is cancelled (the model's
// DisconnectSession). Safe on nil.
func (h *hostEscalation) endSession(id ids.SessionID) {
	if h == nil {
		return
	}
	h.engine.EndSession(id)
	h.mu.Lock()
	delete(h.bindings, id)
	h.mu.Unlock()
}

// detach closes a session's route and ends the session for the engine:
// its terminal is gone, so its capability stops working at once and its
// active request is cancelled (nobody is left to approve it or watch its
// output).
func (h *hostEscalation) detach(id ids.SessionID, r *promptRoute) {
	if h == nil || r == nil {
		return
	}
	h.mu.Lock()
	if h.routes[id] == r {
		delete(h.routes, id)
	}
	h.mu.Unlock()
	r.close()
	h.endSession(id)
}

// Prompt hands the prompt to the requesting session's terminal and waits
// for its signed decision (escalation.Prompter).
func (h *hostEscalation) Prompt(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
	h.mu.Lock()
	r := h.routes[p.SessionID]
	h.mu.Unlock()
	if r == nil {
		return protocol.SignedProtocolRecord{}, fmt.Errorf("session %s: %w", p.SessionID, ErrNoTerminal)
	}
	r.mu.Lock()
	select {
	case <-r.decisions: // a late answer to an earlier prompt
	default:
	}
	r.pending = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.pending = false
		r.mu.Unlock()
	}()
	select {
	case r.prompts <- p:
	case <-r.gone:
		return protocol.SignedProtocolRecord{}, fmt.Errorf("session %s: %w", p.SessionID, ErrNoTerminal)
	case <-ctx.Done():
		return protocol.SignedProtocolRecord{}, context.Cause(ctx)
	}
	select {
	case rec := <-r.decisions:
		return rec, nil
	case <-r.gone:
		return protocol.SignedProtocolRecord{}, fmt.Errorf("session %s: %w", p.SessionID, ErrNoTerminal)
	case <-ctx.Done():
		return protocol.SignedProtocolRecord{}, context.Cause(ctx)
	}
}

// decide passes a decision to the waiting prompt.
func (r *promptRoute) decide(rec protocol.SignedProtocolRecord) error {
	if r == nil {
		return ErrNoPrompt
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pending {
		return ErrNoPrompt
	}
	select {
	case r.decisions <- rec:
		return nil
	default:
		return fmt.Errorf("%w: a decision on the shown prompt was already sent", ErrNoPrompt)
	}
}

func (r *promptRoute) close() {
	r.goneOnce.Do(func() { close(r.gone) })
}
