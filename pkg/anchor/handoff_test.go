package anchor

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/handoff/handofftest"
)

// The exact command line and descriptor layout of `lazaret-anchor serve`,
// as Start hands it for each way of writing the ID map.
func TestServeGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Serve
		want []string
	}{
		{"direct map", Serve{}, []string{"serve"}},
		{"map helper", Serve{AwaitIDMap: true}, []string{"serve", "--await-id-map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handofftest.RoundTrip(t, tc.s, tc.s.Argv, tc.want, func(a []string) (Serve, error) { return ParseServe(a[1:]) })
		})
	}
	if fd := ServeLayout.FD(ControlFile); fd != 3 {
		t.Errorf("control is fd %d, want 3", fd)
	}
	c := os.NewFile(100, "control")
	if files, err := (&Serve{Control: c}).ExtraFiles(); err != nil || !reflect.DeepEqual(files, []*os.File{c}) {
		t.Errorf("ExtraFiles = %v, %v", files, err)
	}
	if _, err := (&Serve{}).ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without control: %v", err)
	}
	if _, err := ParseServe([]string{"--await-id-map", "yes"}); !errors.Is(err, handoff.ErrArgs) {
		t.Errorf("ParseServe with a stray argument: %v", err)
	}
}
