package store

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is the registry name go-containerregistry uses for Docker Hub;
// the store writes it as docker.io, the name users type.
const dockerHub = "index.docker.io"

// Normalize parses an OCI image reference and returns its normalized
// string: registry, repository and tag or digest, with Docker Hub written
// as docker.io and the tag defaulting to latest ("debian" becomes
// "docker.io/library/debian:latest").
func Normalize(s string) (string, name.Reference, error) {
	ref, err := name.ParseReference(s)
	if err != nil {
		return "", nil, fmt.Errorf("image reference %q: %w: %w", s, ErrBadReference, err)
	}
	return normalized(ref), ref, nil
}

func normalized(ref name.Reference) string {
	reg := ref.Context().RegistryStr()
	if reg == dockerHub {
		reg = "docker.io"
	}
	repo := reg + "/" + ref.Context().RepositoryStr()
	switch r := ref.(type) {
	case name.Digest:
		return repo + "@" + r.DigestStr()
	case name.Tag:
		return repo + ":" + r.TagStr()
	}
	return ref.Name()
}

// NormalizeInsecure is Normalize for a registry reached over plain HTTP.
func NormalizeInsecure(s string) (string, name.Reference, error) {
	ref, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		return "", nil, fmt.Errorf("image reference %q: %w: %w", s, ErrBadReference, err)
	}
	return normalized(ref), ref, nil
}
