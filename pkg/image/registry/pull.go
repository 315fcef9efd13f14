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
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

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
	// Transport overrides the HTTP transport (tests use it for TLS to a
	// local registry); nil uses the default.
	Transport http.RoundTripper
	// Insecure allows plain HTTP, which go-containerregistry already uses
	// for localhost and 127.0.0.1 registries.
	Insecure bool
	// Progress, when set, reports bytes stored.
	Progress store.Progress
}

// Pull fetches ref from its registry and stores it in s under its
// normalized name. Every blob is verified against its digest before it is
// stored.
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
	desc, err := remote.Get(r, ropts...)
	if err != nil {
		return store.Entry{}, fmt.Errorf("fetching manifest of %s: %w", norm, err)
	}
	if !desc.MediaType.IsImage() && !desc.MediaType.IsIndex() {
		return store.Entry{}, fmt.Errorf("%s has media type %q, not an image or image index: %w", norm, desc.MediaType, store.ErrUnsupported)
	}
	img, err := desc.Image()
	if err != nil {
		return store.Entry{}, fmt.Errorf("resolving %s for %s: %w", norm, opts.Platform.String(), err)
	}
	return s.PutFetched(norm, img, desc.Digest, opts.Platform, opts.Progress)
}
