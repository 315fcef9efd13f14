package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lazaret.dev/pkg/audit"
)

// CheckAuditSpace checks that the file system of the storage root, which
// holds the Domains' audit logs, has the free space a coordinator needs
// to admit an escalation request (audit.Reserve): below it every request
// is refused, because its audit records could not all be made durable.
func CheckAuditSpace(storageRoot string) Check {
	c := Check{Name: "audit log space"}
	dir := filepath.Join(storageRoot, "domains")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		dir = storageRoot
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			c.Summary = storageRoot + " does not exist yet; no audit log to check"
			return c
		}
	}
	if err := audit.CheckSpace(filepath.Join(dir, "x.audit")); err != nil {
		c.Status = Fail
		c.Summary = fmt.Sprintf("the audit log refuses escalation requests: %v", errors.Unwrap(err))
		if errors.Is(err, audit.ErrNoSpace) {
			c.Summary = fmt.Sprintf("the file system of %s is nearly full: the audit log refuses escalation requests (it needs %d bytes free)", dir, audit.Reserve)
		}
		c.Fix = "free space there, for example in the sandboxes' persistent directories under " + filepath.Join(storageRoot, "state") +
			", or move storage.data_root to a larger file system"
		return c
	}
	c.Summary = fmt.Sprintf("the file system of %s has room for the audit log (at least %d bytes free)", dir, audit.Reserve)
	return c
}
