// Package registry pulls an image from an OCI registry into the local
// image store (package store): registry transport and credentials
// (go-containerregistry's remote and authn, the docker configuration and
// its credential helpers). It is its own package so that what only
// `lazaret-cli image pull` needs, an HTTP client and a registry client
// among them, stays out of the binaries that read the store: the Host
// Coordinator reads it at every start and links none of it.
package registry

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"lazaret.dev/pkg/image/store"
)

// PullOptions configure Pull.
type PullOptions struct {
	// Platform selects from a multi-platform index; zero means
	// store.DefaultPlatform.
	Platform v1.Platform
	// Keychain supplies registry credentials; nil means
	// authn.DefaultKeychain (the docker config file and its helpers).
	Keychain authn.Keychain
	// Transport overrides the HTTP transport; nil uses the default, which
	// trusts the system's certificate authorities (SSL_CERT_FILE and
	// SSL_CERT_DIR replace them). Tests use it to trust a test CA; the
	// command line has no way to set it.
	Transport http.RoundTripper
	// Insecure allows plain HTTP, which go-containerregistry already uses
	// for localhost and 127.0.0.1 registries.
	Insecure bool
	// Progress, when set, is told about each blob: copied from the
	// registry, or already in the store and not fetched.
	Progress store.Progress
}

var (
	// ErrAuthentication means the registry refused the request for want
	// of valid credentials: none were found for it, or it rejected them.
	ErrAuthentication = errors.New("authentication failed")
	// ErrUntrusted means the registry's TLS certificate does not verify:
	// no trusted authority signed it, or it names another host.
	ErrUntrusted = errors.New("TLS certificate not trusted")
)

// explain turns the errors a user can act on into one sentence naming
// the registry and what to do; other errors are returned unchanged.
func explain(registry string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("registry %s: %w (credentials come from $DOCKER_CONFIG/config.json, else ~/.docker/config.json, and its credential helpers; `docker login %s` stores them): %w",
			registry, ErrAuthentication, registry, err)
	}
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		return fmt.Errorf("registry %s: %w: it is signed by an authority this host does not trust (add that CA to the system trust store, or point SSL_CERT_FILE at a bundle that includes it): %w",
			registry, ErrUntrusted, err)
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return fmt.Errorf("registry %s: %w: it is not valid for that host name: %w", registry, ErrUntrusted, err)
	}
	return err
}

// Pull fetches ref from its registry and stores it in s under its
// normalized name. Every blob is verified against its digest before it is
// stored; a blob the store already holds is not fetched, so pulling an
// unchanged image again fetches its manifest and nothing else. Errors for
// refused credentials wrap ErrAuthentication, for an unverifiable
// certificate ErrUntrusted; both name the registry.
func Pull(ctx context.Context, s *store.Store, ref string, opts PullOptions) (store.Entry, error) {
	norm, r, err := store.Normalize(ref)
	if err != nil {
		return store.Entry{}, err
	}
	if opts.Insecure {
		if norm, r, err = store.NormalizeInsecure(ref); err != nil {
			return store.Entry{}, err
		}
	}
	if opts.Platform.OS == "" {
		opts.Platform = store.DefaultPlatform()
	}
	kc := opts.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(kc),
		remote.WithPlatform(opts.Platform),
	}
	if opts.Transport != nil {
		ropts = append(ropts, remote.WithTransport(opts.Transport))
	}
	reg := r.Context().RegistryStr()
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return store.Entry{}, fmt.Errorf("fetching manifest of %s: %w", norm, explain(reg, err))
	}
	if !desc.MediaType.IsImage() && !desc.MediaType.IsIndex() {
		return store.Entry{}, fmt.Errorf("%s has media type %q, not an image or image index: %w", norm, desc.MediaType, store.ErrUnsupported)
	}
	img, err := desc.Image()
	if err != nil {
		return store.Entry{}, fmt.Errorf("resolving %s for %s: %w", norm, opts.Platform.String(), explain(reg, err))
	}
	e, err := s.PutFetched(norm, img, desc.Digest, opts.Platform, opts.Progress)
	if err != nil {
		return store.Entry{}, explain(reg, err)
	}
	return e, nil
}
