package session

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadReportKept(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    KeptPaths
		wantErr error
	}{
		{name: "kept paths before ready", in: "step gitrouting\nkept \".env\"\nkept \"nl\\nname\"\nkept \"build/\"\nready\n",
			want: KeptPaths{Paths: []string{".env", "nl\nname", "build/"}}},
		{name: "non-UTF-8 byte", in: "kept \"\\xff\"\nready\n", want: KeptPaths{Paths: []string{"\xff"}}},
		{name: "named and counted", in: "kept \"a\"\nkept-more 7\nready\n", want: KeptPaths{Paths: []string{"a"}, More: 7}},
		{name: "unquoted", in: "kept .env\nready\n", wantErr: ErrReport},
		{name: "not ASCII-quoted", in: "kept \"é\"\nready\n", wantErr: ErrReport},
		{name: "two paths", in: "kept \"a\" \"b\"\nready\n", wantErr: ErrReport},
		{name: "empty path", in: "kept \"\"\nready\n", wantErr: ErrReport},
		{name: "backquoted", in: "kept `a`\nready\n", wantErr: ErrReport},
		{name: "zero more", in: "kept-more 0\nready\n", wantErr: ErrReport},
		{name: "padded more", in: "kept-more 07\nready\n", wantErr: ErrReport},
		{name: "negative more", in: "kept-more -1\nready\n", wantErr: ErrReport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got KeptPaths
			err := ReadReportWith(strings.NewReader(tc.in), ReportHandlers{Kept: got.add, KeptMore: got.more})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept = %+v, want %+v", got, tc.want)
			}
		})
	}
	// ReadReport ignores kept lines.
	if err := ReadReport(strings.NewReader("kept \".env\"\nready\n"), nil); err != nil {
		t.Errorf("ReadReport of a report with kept lines: %v", err)
	}
}
