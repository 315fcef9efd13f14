package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
)

// publication is the Publication participant (PublishDomain): the
// control socket and identity file staged, recorded with their staged
// identities, renamed into place, recorded Committed with the published
// identities. Withdrawing it closes the listener, which ends the control
// server (the model's BeginTeardown).
type publication struct {
	s     *scope
	trust *trustStep

	// staged is set by Start and owns the listener until Release;
	// published is set once the rename is done. Both are used only by the
	// goroutine that runs the start and the teardown; listener hands the
	// control server its listener before any teardown.
	staged    *control.Staged
	published *control.Publication
}

func (p *publication) Step() Step            { return StepPublish }
func (p *publication) Lost() <-chan struct{} { return nil }

func (p *publication) listener() *net.UnixListener { return p.staged.Listener }

func (p *publication) Start(context.Context) error {
	s := p.s
	const role = domainstore.RolePublication
	if err := s.intent(role); err != nil {
		return err
	}
	t := p.trust.anchor
	st, err := control.Stage(s.paths, &t.pub, &t.manifest)
	if err != nil {
		return fmt.Errorf("staging the control socket and identity file: %w", err)
	}
	p.staged = st
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		r := o.Publication
		r.StagedSocketPath = ptr(st.Paths.StagedSocket)
		r.StagedIdentityPath = ptr(st.Paths.StagedIdentity)
		r.SocketIdentity = ptr(st.Socket)
		r.IdentityFileIdentity = ptr(st.IdentityFile)
	}); err != nil {
		return err
	}
	s.trace.domain("PublishDomain")
	pub, err := st.Publish()
	if err != nil {
		return fmt.Errorf("publishing the control socket and identity file: %w", err)
	}
	p.published = &pub
	if pub.Socket != st.Socket || pub.IdentityFile != st.IdentityFile {
		return fmt.Errorf("published objects differ from the staged ones")
	}
	return s.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.Publication.SocketPath = ptr(pub.Paths.Socket)
		o.Publication.IdentityPath = ptr(pub.Paths.Identity)
	})
}

// Release withdraws the publication: the identity file, then the socket,
// each only when it is still the recorded object, and closes the
// listener. The teardown calls it first, before the sessions end, and
// the release order again; the second call finds it Clean.
func (p *publication) Release(context.Context) error {
	s := p.s
	const role = domainstore.RolePublication
	if err := s.releaseIntent(role, nil); err != nil {
		return err
	}
	switch {
	case p.published != nil:
		if err := control.Withdraw(*p.published); err != nil {
			return fmt.Errorf("withdrawing the publication: %w", err)
		}
		p.staged.Listener.Close()
	case p.staged != nil:
		if err := p.staged.Abort(); err != nil {
			return fmt.Errorf("removing the staged publication: %w", err)
		}
	}
	p.published, p.staged = nil, nil
	return s.clean(role, "identity file and socket removed after their mount ID, device and inode matched the record")
}

// recoverPublication removes the recorded identity file and socket, staged
// or published, where their mount ID, device and inode match the record.
func recoverPublication(_ *scope, o *domainstore.ParticipantOwnership) (string, error) {
	r := o.Publication
	var errs []error
	for _, f := range []struct {
		path *string
		id   *hostid.MountIdentity
	}{
		{r.IdentityPath, r.IdentityFileIdentity},
		{r.SocketPath, r.SocketIdentity},
		{r.StagedIdentityPath, r.IdentityFileIdentity},
		{r.StagedSocketPath, r.SocketIdentity},
	} {
		if f.path != nil && f.id != nil {
			errs = append(errs, control.WithdrawFile(*f.path, *f.id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return "identity file and socket removed where their mount ID, device and inode matched the record", nil
}
