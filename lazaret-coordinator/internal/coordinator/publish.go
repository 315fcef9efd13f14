package coordinator

import (
	"fmt"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
)

// startPublish is PublishDomain: control socket and identity file staged,
// recorded with their staged identities, renamed into place, recorded
// Committed with the published identities.
func (g *generation) startPublish() error {
	const role = domainstore.RolePublication
	if err := g.intent(role); err != nil {
		return err
	}
	st, err := control.Stage(g.paths, &g.trust.pub, &g.trust.manifest)
	if err != nil {
		return fmt.Errorf("staging the control socket and identity file: %w", err)
	}
	g.staged = st
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		p := o.Publication
		p.StagedSocketPath = ptr(st.Paths.StagedSocket)
		p.StagedIdentityPath = ptr(st.Paths.StagedIdentity)
		p.SocketIdentity = ptr(st.Socket)
		p.IdentityFileIdentity = ptr(st.IdentityFile)
	}); err != nil {
		return err
	}
	g.trace.domain("PublishDomain")
	pub, err := st.Publish()
	if err != nil {
		return fmt.Errorf("publishing the control socket and identity file: %w", err)
	}
	g.pub = &pub
	if pub.Socket != st.Socket || pub.IdentityFile != st.IdentityFile {
		return fmt.Errorf("published objects differ from the staged ones")
	}
	return g.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.Publication.SocketPath = ptr(pub.Paths.Socket)
		o.Publication.IdentityPath = ptr(pub.Paths.Identity)
	})
}

// withdrawPublication removes the identity file, then the socket, each
// only when it is still the recorded object, and closes the listener.
func (g *generation) withdrawPublication() error {
	const role = domainstore.RolePublication
	if err := g.releaseIntent(role, nil); err != nil {
		return err
	}
	switch {
	case g.pub != nil:
		if err := control.Withdraw(*g.pub); err != nil {
			return fmt.Errorf("withdrawing the publication: %w", err)
		}
		g.staged.Listener.Close()
	case g.staged != nil:
		if err := g.staged.Abort(); err != nil {
			return fmt.Errorf("removing the staged publication: %w", err)
		}
	}
	g.pub, g.staged = nil, nil
	return g.clean(role, "identity file and socket removed after their mount ID, device and inode matched the record")
}
