package handoff

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

var testLayout = Layout{
	Child:   "test child",
	Command: []string{"serve"},
	Flags: []Flag{
		{Name: "config", Required: true},
		{Name: "linger"},
		{Name: "recover-only", Switch: true},
	},
	Files:    []string{"lock", "report"},
	Trailing: true,
}

func TestArgv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v        Values
		trailing []string
		want     []string
		err      error
	}{
		{"required only", Values{"config": "/c"}, nil, []string{"serve", "--config", "/c", "--"}, nil},
		{"flag order is the layout's", Values{"recover-only": "true", "linger": "1s", "config": "/c"}, []string{"/bin/x", "-y"},
			[]string{"serve", "--config", "/c", "--linger", "1s", "--recover-only", "--", "/bin/x", "-y"}, nil},
		{"empty value is rendered", Values{"config": ""}, nil, []string{"serve", "--config", "", "--"}, nil},
		{"missing required", Values{"linger": "1s"}, nil, nil, ErrArgs},
		{"unknown flag", Values{"config": "/c", "color": "x"}, nil, nil, ErrArgs},
		{"switch with a value", Values{"config": "/c", "recover-only": "yes"}, nil, nil, ErrArgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testLayout.Argv(tc.v, tc.trailing)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Argv error %v, want %v", err, tc.err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Argv = %q, want %q", got, tc.want)
			}
		})
	}
	noTrailing := testLayout
	noTrailing.Trailing = false
	if _, err := noTrailing.Argv(Values{"config": "/c"}, []string{"x"}); !errors.Is(err, ErrArgs) {
		t.Errorf("trailing arguments to a layout without them: %v", err)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		v        Values
		trailing []string
		msg      string // in the error; "" for success
	}{
		{"all", []string{"--config", "/c", "--recover-only", "--linger", "2s", "--", "/bin/x", "--config"},
			Values{"config": "/c", "recover-only": "true", "linger": "2s"}, []string{"/bin/x", "--config"}, ""},
		{"value that looks like a flag", []string{"--config", "--linger"}, Values{"config": "--linger"}, []string{}, ""},
		{"missing required", []string{"--linger", "1s"}, nil, nil, "--config is missing"},
		{"no value", []string{"--config"}, nil, nil, "--config has no value"},
		{"twice", []string{"--config", "a", "--config", "b"}, nil, nil, "--config is given twice"},
		{"unknown", []string{"--config", "a", "--colour", "b"}, nil, nil, `unknown flag "--colour"`},
		{"single dash", []string{"-config", "a"}, nil, nil, `unexpected argument "-config"`},
		{"equals form", []string{"--config=a"}, nil, nil, `unknown flag "--config=a"`},
		{"stray word", []string{"--config", "a", "b"}, nil, nil, `unexpected argument "b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, trailing, err := testLayout.Parse(tc.args)
			if tc.msg != "" {
				if !errors.Is(err, ErrArgs) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "test child: ") {
					t.Fatalf("Parse error %v, want ErrArgs saying %q", err, tc.msg)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(v, tc.v) || !reflect.DeepEqual(trailing, tc.trailing) {
				t.Fatalf("Parse = %v, %q, %v; want %v, %q", v, trailing, err, tc.v, tc.trailing)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	if testLayout.FD("lock") != 3 || testLayout.FD("report") != 4 || testLayout.NextFD() != 5 {
		t.Fatalf("FD(lock) %d, FD(report) %d, NextFD %d; want 3, 4, 5", testLayout.FD("lock"), testLayout.FD("report"), testLayout.NextFD())
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("FD of an unknown name does not panic")
			}
		}()
		testLayout.FD("socket")
	}()
	a, b, x := os.NewFile(100, "a"), os.NewFile(101, "b"), os.NewFile(102, "x")
	got, err := testLayout.ExtraFiles(map[string]*os.File{"report": b, "lock": a}, x)
	if err != nil || !reflect.DeepEqual(got, []*os.File{a, b, x}) {
		t.Fatalf("ExtraFiles = %v, %v", got, err)
	}
	if _, err := testLayout.ExtraFiles(map[string]*os.File{"lock": a}); !errors.Is(err, ErrFiles) || !strings.Contains(err.Error(), "descriptor 4 (report)") {
		t.Errorf("ExtraFiles without report: %v", err)
	}
	if _, err := testLayout.ExtraFiles(map[string]*os.File{"lock": a, "report": b, "socket": x}); !errors.Is(err, ErrFiles) {
		t.Errorf("ExtraFiles with an unknown name: %v", err)
	}
}

// TestInherit runs the test binary as a child with the layout's files.
func TestInherit(t *testing.T) {
	if os.Getenv("HANDOFF_TEST_CHILD") != "" {
		inheritChild()
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	run := func(files []*os.File) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInherit$")
		cmd.Env = append(os.Environ(), "HANDOFF_TEST_CHILD=1")
		cmd.ExtraFiles = files
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	if out := run([]*os.File{r, w}); !strings.Contains(out, "lock:cloexec report:cloexec") {
		t.Errorf("child with both files: %q", out)
	}
}

// A descriptor that is not open is refused, and nothing is taken. The
// runtime of a child may reuse a low free descriptor, so the missing one
// is far above any this process has open.
func TestInheritMissing(t *testing.T) {
	l := Layout{Child: "test child"}
	for i := range 4000 {
		l.Files = append(l.Files, fmt.Sprint("f", i))
	}
	files, err := l.Inherit()
	if !errors.Is(err, ErrFiles) || !strings.Contains(err.Error(), "is not open") || files != nil {
		t.Fatalf("Inherit = %v, %v; want ErrFiles and no files", files, err)
	}
}

func inheritChild() {
	files, err := testLayout.Inherit()
	if err != nil {
		fmt.Println(err)
		os.Exit(0)
	}
	for _, name := range testLayout.Files {
		f := files[name]
		flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
		state := "inherited"
		if err == nil && flags&unix.FD_CLOEXEC != 0 {
			state = "cloexec"
		}
		if f.Name() != name {
			state = "misnamed"
		}
		fmt.Printf("%s:%s ", name, state)
	}
	fmt.Println()
	os.Exit(0)
}

func FuzzParse(f *testing.F) {
	f.Add("--config\x00/c\x00--\x00/bin/x")
	f.Add("--recover-only\x00--config\x00--")
	f.Add("--linger")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		v, trailing, err := testLayout.Parse(args)
		if err != nil {
			if !errors.Is(err, ErrArgs) {
				t.Fatalf("Parse error %v is not ErrArgs", err)
			}
			return
		}
		argv, err := testLayout.Argv(v, trailing)
		if err != nil {
			t.Fatalf("Argv of parsed %v, %q: %v", v, trailing, err)
		}
		v2, trailing2, err := testLayout.Parse(argv[len(testLayout.Command):])
		if err != nil || !reflect.DeepEqual(v, v2) || !reflect.DeepEqual(trailing, trailing2) {
			t.Fatalf("round trip of %q: %v, %q, %v; want %v, %q", args, v2, trailing2, err, v, trailing)
		}
	})
}

type testParent struct{ argvErr, filesErr error }

func (p testParent) Argv() ([]string, error)         { return []string{"serve"}, p.argvErr }
func (p testParent) ExtraFiles() ([]*os.File, error) { return []*os.File{os.Stdin}, p.filesErr }

func TestRender(t *testing.T) {
	argv, files, err := Render(testParent{})
	if err != nil || !reflect.DeepEqual(argv, []string{"serve"}) || !reflect.DeepEqual(files, []*os.File{os.Stdin}) {
		t.Fatalf("Render = %q, %v, %v", argv, files, err)
	}
	for _, p := range []testParent{{argvErr: ErrArgs}, {filesErr: ErrFiles}} {
		if argv, files, err := Render(p); err == nil || argv != nil || files != nil {
			t.Errorf("Render(%+v) = %q, %v, %v; want only an error", p, argv, files, err)
		}
	}
}
