// Command gendocs writes the shell completion scripts and the man pages of
// lazaret-cli into a directory, from the command tree of the lazaret-cli
// it is built with. `make install-lazaret-cli` runs it on the build host:
//
//	DIR/completions/lazaret-cli.bash  (bash-completion/completions/lazaret-cli)
//	DIR/completions/_lazaret-cli      (zsh site-functions)
//	DIR/completions/lazaret-cli.fish  (fish vendor_completions.d)
//	DIR/man1/lazaret-cli*.1
//
// It is a build tool, not part of the installed program.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"lazaret.dev/lazaret-cli/internal/cli"
	"lazaret.dev/lazaret-cli/internal/clidoc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gendocs DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	app := cli.App()
	files := map[string]string{}
	for shell, name := range map[string]string{"bash": app.Name + ".bash", "zsh": "_" + app.Name, "fish": app.Name + ".fish"} {
		s, err := clidoc.Script(app, shell)
		if err != nil {
			return err
		}
		files[filepath.Join("completions", name)] = s
	}
	for _, p := range clidoc.Pages(app) {
		files[filepath.Join("man1", p.Name)] = p.Text
	}
	// A page of a command that no longer exists must not be installed.
	if err := os.RemoveAll(filepath.Join(dir, "man1")); err != nil {
		return fmt.Errorf("clearing old man pages: %w", err)
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("creating %q: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return fmt.Errorf("writing %q: %w", p, err)
		}
	}
	return nil
}
