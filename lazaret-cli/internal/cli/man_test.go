package cli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"lazaret.dev/lazaret-cli/internal/clidoc"
)

func TestManPages(t *testing.T) {
	app := App()
	pages := clidoc.Pages(app)
	byName := map[string]string{}
	for _, p := range pages {
		byName[p.Name] = p.Text
	}
	prog := byName["lazaret-cli.1"]
	if !strings.HasPrefix(prog, ".TH \"LAZARET\\-CLI\" \"1\"") || !strings.Contains(prog, ".SH NAME\nlazaret\\-cli \\- ") {
		t.Fatalf("lazaret-cli.1 lacks its title or NAME section:\n%s", prog)
	}
	for _, c := range app.VisibleCommands() {
		page, ok := byName["lazaret-cli-"+c.Name+".1"]
		if !ok {
			t.Errorf("no man page for %s", c.Name)
			continue
		}
		for _, s := range []string{".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n", ".SH SEE ALSO\n"} {
			if !strings.Contains(page, s) {
				t.Errorf("lazaret-cli-%s.1 lacks %q", c.Name, s)
			}
		}
		if !strings.Contains(prog, ".BR lazaret\\-cli\\-"+strings.ReplaceAll(c.Name, "-", `\-`)+" (1)") {
			t.Errorf("lazaret-cli.1 does not refer to lazaret-cli-%s(1)", c.Name)
		}
	}
	if len(pages) != len(app.VisibleCommands())+1 {
		t.Errorf("%d pages for %d commands", len(pages), len(app.VisibleCommands()))
	}
	if _, ok := byName["lazaret-cli-completion.1"]; ok {
		t.Error("the hidden completion command has a man page")
	}
	if !strings.Contains(byName["lazaret-cli-image.1"], `.SS "lazaret\-cli image build\-dir DIR"`) ||
		!strings.Contains(byName["lazaret-cli-image.1"], "\\fB\\-\\-storage\\-root\\fR \\fIDIR\\fR") {
		t.Errorf("lazaret-cli-image.1 lacks build-dir or --storage-root:\n%s", byName["lazaret-cli-image.1"])
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff is not installed: the pages are not rendered")
		return
	}
	for _, p := range pages {
		cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou")
		cmd.Stdin = strings.NewReader(p.Text)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil || errb.Len() != 0 {
			t.Errorf("groff %s: %v\n%s", p.Name, err, errb.String())
		}
		if !strings.Contains(out.String(), "NAME") {
			t.Errorf("groff %s rendered no NAME section", p.Name)
		}
	}
}
