package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckAuditSpace(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	if c := CheckAuditSpace(missing); c.Status != OK || !strings.Contains(c.Summary, "does not exist yet") {
		t.Errorf("absent storage root: %+v", c)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "domains"), 0o700); err != nil {
		t.Fatal(err)
	}
	c := CheckAuditSpace(root)
	if c.Status == Fail && !strings.Contains(c.Summary, "nearly full") {
		t.Errorf("a failure that does not say why: %+v", c)
	}
	if c.Status == OK && !strings.Contains(c.Summary, filepath.Join(root, "domains")) {
		t.Errorf("summary does not name the directory checked: %+v", c)
	}
	if c.Status == Fail && c.Fix == "" {
		t.Errorf("a failure without a fix: %+v", c)
	}
}
