// Command tracecheck validates protocol traces against the model: each
// argument is a trace file or a directory of them ($LAZARET_TRACE_DIR).
// It prints one line per valid trace and the violation of an invalid one,
// and exits 1 when any trace is invalid, 2 on bad usage.
package main

import (
	"errors"
	"fmt"
	"os"

	"lazaret.dev/pkg/conform"
	"lazaret.dev/pkg/trace"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: tracecheck TRACE-FILE-OR-DIR...")
		os.Exit(2)
	}
	bad := false
	for _, arg := range os.Args[1:] {
		fi, err := os.Stat(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if fi.IsDir() {
			reps, err := conform.ValidateDir(arg)
			for _, r := range reps {
				fmt.Printf("%s: valid: %s\n", arg, summary(r))
			}
			if err != nil {
				fmt.Println(err)
				bad = true
			}
			continue
		}
		evs, err := trace.Read(arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		r, err := conform.Validate(evs)
		var v *conform.Violation
		switch {
		case errors.As(err, &v):
			fmt.Printf("%s: %s\n", arg, v.Format())
			bad = true
		case err != nil:
			fmt.Printf("%s: %v\n", arg, err)
			bad = true
		default:
			fmt.Printf("%s: valid: %s\n", arg, summary(r))
		}
	}
	if bad {
		os.Exit(1)
	}
}

func summary(r conform.Report) string {
	return fmt.Sprintf("%d events, %d sessions, %d requests, %d model steps in %d projections",
		r.Events, r.Sessions, r.Requests, r.Steps, r.Projections)
}
