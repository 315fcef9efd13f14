package view

import (
	"os"
	"testing"

	"lazaret.dev/pkg/testbin"
)

func TestMain(m *testing.M) {
	// The views these tests mount must not be copied into the mount
	// namespaces of tests running beside them (testbin.InPrivateMounts).
	if code, ran := testbin.InPrivateMounts(); ran {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
