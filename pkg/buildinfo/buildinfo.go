// Package buildinfo reports the version and revision a Lazaret binary was
// built from. The Makefile stamps both through -ldflags -X; a binary built
// with plain `go build` falls back to the module and VCS data that the Go
// toolchain embeds.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by the Makefile:
//
//	-X lazaret.dev/pkg/buildinfo.version=... -X lazaret.dev/pkg/buildinfo.revision=...
var (
	version  string
	revision string
)

// Version is the release version, or the main module version, or "devel".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// Revision is the VCS revision, or "unknown".
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is the one line every binary prints for --version.
func String(binary string) string {
	return fmt.Sprintf("%s version %s (revision %s, %s %s/%s)",
		binary, Version(), Revision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
