package session

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"lazaret.dev/pkg/startup"
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
		{name: "unquoted", in: "kept .env\nready\n", wantErr: startup.ErrMalformed},
		{name: "not ASCII-quoted", in: "kept \"é\"\nready\n", wantErr: startup.ErrMalformed},
		{name: "two paths", in: "kept \"a\" \"b\"\nready\n", wantErr: startup.ErrMalformed},
		{name: "empty path", in: "kept \"\"\nready\n", wantErr: startup.ErrMalformed},
		{name: "backquoted", in: "kept `a`\nready\n", wantErr: startup.ErrMalformed},
		{name: "zero more", in: "kept-more 0\nready\n", wantErr: startup.ErrMalformed},
		{name: "padded more", in: "kept-more 07\nready\n", wantErr: startup.ErrMalformed},
		{name: "negative more", in: "kept-more -1\nready\n", wantErr: startup.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got KeptPaths
			err := startup.Read(strings.NewReader(tc.in), startup.Handlers{Kept: got.add, KeptMore: got.more})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept = %+v, want %+v", got, tc.want)
			}
		})
	}
}
