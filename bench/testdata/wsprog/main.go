// Command wsprog summarises a tree of text files: lines, words and bytes per
// file extension, and the most frequent words. bench/workspace-view builds it
// inside a sandbox as a small, standard-library-only Go program; it is not
// part of Lazaret.
package main

import (
	"flag"
	"fmt"
	"os"

	"lazaret.invalid/wsprog/scan"
	"lazaret.invalid/wsprog/table"
	"lazaret.invalid/wsprog/tally"
)

func main() {
	top := flag.Int("top", 10, "how many of the most frequent words to print")
	maxSize := flag.Int64("max-size", 1<<20, "skip files larger than this many bytes")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: wsprog [flags] DIR...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Args(), *top, *maxSize); err != nil {
		fmt.Fprintf(os.Stderr, "wsprog: %v\n", err)
		os.Exit(1)
	}
}

func run(dirs []string, top int, maxSize int64) error {
	t := tally.New()
	for _, dir := range dirs {
		err := scan.Walk(dir, scan.Options{MaxSize: maxSize, SkipHidden: true}, func(f scan.File) error {
			return t.Add(f.Ext, f.Lines, f.Bytes)
		})
		if err != nil {
			return fmt.Errorf("scanning %q: %w", dir, err)
		}
	}
	ext := table.New("extension", "files", "lines", "words", "bytes")
	for _, e := range t.Extensions() {
		s := t.Stats(e)
		ext.Row(e, s.Files, s.Lines, s.Words, s.Bytes)
	}
	if err := ext.Write(os.Stdout); err != nil {
		return fmt.Errorf("writing the extension table: %w", err)
	}
	fmt.Println()
	words := table.New("word", "count")
	for _, w := range t.Top(top) {
		words.Row(w.Word, w.Count)
	}
	if err := words.Write(os.Stdout); err != nil {
		return fmt.Errorf("writing the word table: %w", err)
	}
	return nil
}
