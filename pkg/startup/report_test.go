package startup

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// closer is a bytes.Buffer that records its Close.
type closer struct {
	bytes.Buffer
	closed int
}

func (c *closer) Close() error { c.closed++; return nil }

// The exact bytes a coordinator writes: a change here breaks the CLI of
// another build.
func TestWriterGolden(t *testing.T) {
	var b closer
	w := NewWriter(&b)
	w.Step("recover")
	w.Step("prepare")
	w.Step("trust")
	w.Done("trust")
	w.Done("pre\npare")
	w.Kept([]string{".env", "nl\nname\xff", "build/", "é"})
	w.Ready()
	w.Step("after")
	w.Fail(errors.New("late").Error())
	want := "step recover\nstep prepare\nstep trust\ndone trust\ndone pre pare\nkept \".env\"\nkept \"nl\\nname\\xff\"\nkept \"build/\"\nkept \"\\u00e9\"\nready\n"
	if b.String() != want || b.closed != 1 {
		t.Fatalf("report %q (closed %d times)\nwant %q, closed once", b.String(), b.closed, want)
	}

	var f closer
	w = NewWriter(&f)
	w.Step("anchor")
	w.Fail("anchor step: user namespaces\nare disabled\t")
	w.Ready()
	if want := "step anchor\nerror anchor step: user namespaces are disabled\n"; f.String() != want || f.closed != 1 {
		t.Fatalf("report %q (closed %d times)\nwant %q, closed once", f.String(), f.closed, want)
	}

	// No file: nothing is written and nothing panics.
	w = NewWriter(nil)
	w.Step("x")
	w.Kept([]string{"a"})
	w.Ready()
}

func TestWriterKeptBound(t *testing.T) {
	paths := []string{".env", strings.Repeat("x", MaxLine-8) + "\x01"} // too long once quoted
	for i := range 40 {
		paths = append(paths, fmt.Sprintf("f%02d", i))
	}
	var b closer
	w := NewWriter(&b)
	w.Kept(paths)
	w.Ready()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	// 42 paths: 32 named, the long one and 9 more counted.
	if len(lines) != MaxKept+2 || lines[MaxKept] != "kept-more 10" || lines[MaxKept+1] != "ready" {
		t.Fatalf("%d lines ending %q, want %d kept, kept-more 10 and ready", len(lines), lines[len(lines)-2:], MaxKept)
	}
	for _, l := range lines {
		if len(l)+1 > MaxLine {
			t.Fatalf("line of %d bytes", len(l)+1)
		}
	}
	// What the writer writes, the reader reads back.
	var kept []string
	more := 0
	if err := Read(strings.NewReader(b.String()), Handlers{Kept: func(p string) { kept = append(kept, p) }, KeptMore: func(n int) { more += n }}); err != nil {
		t.Fatal(err)
	}
	if len(kept) != MaxKept || kept[0] != ".env" || more != 10 {
		t.Fatalf("read back %d kept paths from %q and %d more", len(kept), kept[0], more)
	}
}

func TestRead(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		steps    []string
		kept     []string
		keptMore int
		done     []string
		wantErr  error  // errors.Is target, nil for ready
		message  string // Error message
	}{
		{name: "ready", in: "step prepare\nstep sandbox\nready\n", steps: []string{"prepare", "sandbox"}},
		{name: "ready alone", in: "ready\n"},
		{name: "ready then junk is not read", in: "ready\nwhatever"},
		{name: "error", in: "step anchor\nerror anchor: user namespaces are disabled\n", steps: []string{"anchor"}, message: "anchor: user namespaces are disabled"},
		{name: "eof", in: "step prepare\n", steps: []string{"prepare"}, wantErr: ErrExited},
		{name: "empty", in: "", wantErr: ErrExited},
		{name: "unterminated", in: "ready", wantErr: ErrMalformed},
		{name: "unknown keyword", in: "began a\n", wantErr: ErrMalformed},
		{name: "overlapping steps", in: "step prepare\nstep trust\ndone trust\nstep anchor\ndone prepare\nready\n",
			steps: []string{"prepare", "trust", "anchor"}, done: []string{"trust", "prepare"}},
		{name: "empty done", in: "done\n", wantErr: ErrMalformed},
		{name: "ready with argument", in: "ready now\n", wantErr: ErrMalformed},
		{name: "empty step", in: "step \n", wantErr: ErrMalformed},
		{name: "empty error", in: "error\n", wantErr: ErrMalformed},
		{name: "control character", in: "step a\x1b[2J\n", wantErr: ErrMalformed},
		{name: "not utf8", in: "step \xff\n", wantErr: ErrMalformed},
		{name: "too long", in: "step " + strings.Repeat("a", MaxLine) + "\n", wantErr: ErrMalformed},
		{name: "kept paths before ready", in: "step gitrouting\nkept \".env\"\nkept \"nl\\nname\"\nkept \"build/\"\nready\n",
			steps: []string{"gitrouting"}, kept: []string{".env", "nl\nname", "build/"}},
		{name: "non-UTF-8 byte", in: "kept \"\\xff\"\nready\n", kept: []string{"\xff"}},
		{name: "named and counted", in: "kept \"a\"\nkept-more 7\nready\n", kept: []string{"a"}, keptMore: 7},
		{name: "unquoted", in: "kept .env\nready\n", wantErr: ErrMalformed},
		{name: "not ASCII-quoted", in: "kept \"é\"\nready\n", wantErr: ErrMalformed},
		{name: "two paths", in: "kept \"a\" \"b\"\nready\n", wantErr: ErrMalformed},
		{name: "empty path", in: "kept \"\"\nready\n", wantErr: ErrMalformed},
		{name: "backquoted", in: "kept `a`\nready\n", wantErr: ErrMalformed},
		{name: "zero more", in: "kept-more 0\nready\n", wantErr: ErrMalformed},
		{name: "padded more", in: "kept-more 07\nready\n", wantErr: ErrMalformed},
		{name: "negative more", in: "kept-more -1\nready\n", wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps, kept, done []string
			more := 0
			err := Read(strings.NewReader(tt.in), Handlers{
				Step:     func(s string) { steps = append(steps, s) },
				Done:     func(s string) { done = append(done, s) },
				Kept:     func(p string) { kept = append(kept, p) },
				KeptMore: func(n int) { more += n },
			})
			if tt.message != "" {
				var se *Error
				if !errors.As(err, &se) || se.Message != tt.message {
					t.Fatalf("err = %v, want Error %q", err, tt.message)
				}
			} else if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr != nil && !errors.Is(tt.wantErr, ErrExited) {
				return
			}
			if !reflect.DeepEqual(steps, tt.steps) || !reflect.DeepEqual(kept, tt.kept) || more != tt.keptMore || !reflect.DeepEqual(done, tt.done) {
				t.Errorf("steps %q, kept %q, more %d, done %q; want %q, %q, %d, %q", steps, kept, more, done, tt.steps, tt.kept, tt.keptMore, tt.done)
			}
		})
	}
	// Nil handlers ignore their lines.
	if err := Read(strings.NewReader("step a\nkept \".env\"\nkept-more 2\nready\n"), Handlers{}); err != nil {
		t.Errorf("Read with no handlers: %v", err)
	}
}

func FuzzRead(f *testing.F) {
	for _, s := range []string{"step prepare\nready\n", "error x\n", "", "ready", "step \xff\n", "kept \"a\\x00\"\nkept-more 3\nready\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Read(bytes.NewReader(b), Handlers{
			Step: func(s string) {
				if s == "" || strings.ContainsAny(s, "\n\x00") {
					t.Fatalf("step %q passed through", s)
				}
			},
			Kept: func(p string) {
				if p == "" {
					t.Fatal("empty kept path passed through")
				}
			},
			KeptMore: func(n int) {
				if n <= 0 {
					t.Fatalf("kept-more %d passed through", n)
				}
			},
		})
		var se *Error
		if errors.As(err, &se) && (se.Message == "" || strings.Contains(se.Message, "\n")) {
			t.Fatalf("start error message %q", se.Message)
		}
		if err == nil && !bytes.Contains(b, []byte("ready\n")) {
			t.Fatalf("ready without a ready line in %q", b)
		}
		if err != nil && se == nil && !errors.Is(err, ErrExited) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is neither Error, ErrExited nor ErrMalformed", err)
		}
	})
}
