package session

import (
	"fmt"
	"path/filepath"

	"lazaret.dev/pkg/image/store"
)

// DefaultShell is the interactive command of an image that names none.
const DefaultShell = "/bin/sh"

// DefaultArgv is the command an interactive session runs when the
// developer names none: the image's entrypoint followed by its command, as
// a container runtime would run it, else DefaultShell. The image is read
// from the local image store under storageRoot, the store the coordinator
// prepared the sandbox from.
func DefaultArgv(storageRoot, image string) ([]string, error) {
	s, err := store.Open(filepath.Join(storageRoot, "images"), nil)
	if err != nil {
		return nil, fmt.Errorf("opening the image store: %w", err)
	}
	img, err := s.Open(image)
	if err != nil {
		return nil, fmt.Errorf("reading the command of image %s: %w", image, err)
	}
	defer img.Close()
	var argv []string
	if img.Config != nil {
		argv = append(append(argv, img.Config.Config.Entrypoint...), img.Config.Config.Cmd...)
	}
	if len(argv) == 0 || argv[0] == "" {
		return []string{DefaultShell}, nil
	}
	return argv, nil
}
