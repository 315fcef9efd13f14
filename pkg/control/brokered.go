package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// BrokeredCredentialsName is the file in a Domain's runtime directory that
// lists the credentials the running generation's broker holds: names and
// destinations only, never a value or a placeholder. Written with the
// network-policy file and removed with it; `lazaret-cli status` shows it.
const BrokeredCredentialsName = "brokered-credentials"

// BrokeredCredential is one credential of the record: the sandbox
// variable, where the broker puts its value (scheme, and the header for
// the header scheme) and the host:port destinations it goes to.
type BrokeredCredential struct {
	Name         string   `json:"name"`
	Scheme       string   `json:"scheme"`
	Header       string   `json:"header,omitempty"`
	Destinations []string `json:"destinations"`
}

// WriteBrokeredCredentials records cs in dir.
func WriteBrokeredCredentials(dir string, cs []BrokeredCredential) error {
	b, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	return writeDomainFile(dir, BrokeredCredentialsName, b)
}

// ReadBrokeredCredentials reads dir's record; no record is no credential.
func ReadBrokeredCredentials(dir string) ([]BrokeredCredential, error) {
	b, err := readDomainFile(dir, BrokeredCredentialsName, 64<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var cs []BrokeredCredential
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("%q: %w", filepath.Join(dir, BrokeredCredentialsName), err)
	}
	return cs, nil
}
