package store

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PullOptions configure Pull.
type PullOptions struct {
	// Platform selects from a multi-platform index; zero means
	// DefaultPlatform.
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
	Progress Progress
}

// Pull fetches ref from its registry and stores it under its normalized
// name. Every blob is verified against its digest before it is stored.
func (s *Store) Pull(ctx context.Context, ref string, opts PullOptions) (Entry, error) {
	norm, r, err := Normalize(ref)
	if err != nil {
		return Entry{}, err
	}
	if opts.Insecure {
		if norm, r, err = normalizeInsecure(ref); err != nil {
			return Entry{}, err
		}
	}
	if opts.Platform.OS == "" {
		opts.Platform = DefaultPlatform()
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
		return Entry{}, fmt.Errorf("fetching manifest of %s: %w", norm, err)
	}
	if !isImage(desc.MediaType) && !isIndex(desc.MediaType) {
		return Entry{}, fmt.Errorf("%s has media type %q, not an image or image index: %w", norm, desc.MediaType, ErrUnsupported)
	}
	img, err := desc.Image()
	if err != nil {
		return Entry{}, fmt.Errorf("resolving %s for %s: %w", norm, opts.Platform.String(), err)
	}
	st, err := s.newStaging()
	if err != nil {
		return Entry{}, err
	}
	defer st.close()
	st.progress = opts.Progress
	d, err := st.putImage(img)
	if err != nil {
		return Entry{}, fmt.Errorf("pulling %s: %w", norm, err)
	}
	if !platformMatches(opts.Platform, d.Platform) {
		return Entry{}, fmt.Errorf("%s is for %s, not %s: %w", norm, d.Platform.String(), opts.Platform.String(), ErrUnsupported)
	}
	es, err := st.commit([]named{{ref: norm, desc: d, source: desc.Digest}})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}
