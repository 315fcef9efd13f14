package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
)

func runStoreApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "lazaret-cli", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{storeCommand()}}
	err := app.Run(append([]string{"lazaret-cli"}, args...))
	return out.String(), err
}

func makeStores(t *testing.T, root string) ids.DomainID {
	t.Helper()
	d := domainstore.Domain{DomainID: ids.DomainID{0xd0, 1}, ProfileName: "default", CanonicalWorkspace: "/home/u/src"}
	s, err := domainstore.Create(root, d, domainstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gid := ids.GenerationID{0x9e}
	err = s.Update(func(tx *domainstore.Tx) error {
		if err := tx.PutGeneration(domainstore.Generation{DomainID: d.DomainID, GenerationID: gid, ConfigurationFingerprint: ids.Digest{1},
			CoordinatorID: ids.CoordinatorID{2}, NetworkSidecarID: ids.SidecarID{3}, SandboxID: ids.SandboxID{4}, DurableDecision: domainstore.PhaseStarting}); err != nil {
			return err
		}
		boot := s.Boot()
		rs := hostid.CommittedOwnership(hostid.PidfsProcessIdentityV1{Authority: hostid.PidfsProcessAuthorityV1{BootID: boot, PidfsDev: 1, PidfsInode: 2}, HostPID: 3, StartTimeTicks: 4})
		return tx.PutParticipant(domainstore.Participant{GenerationID: gid, Role: domainstore.RoleNetwork, State: domainstore.StateIntent,
			Ownership: &domainstore.ParticipantOwnership{Network: &domainstore.NetworkOwnership{RuntimeSupervisor: rs}}}, nil)
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(root, catalog.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return d.DomainID
}

func TestStoreInspect(t *testing.T) {
	root := t.TempDir()
	id := makeStores(t, root)
	before, _ := os.ReadFile(domainstore.Path(root, id))
	out, err := runStoreApp(t, "store", "inspect", "--storage-root", root)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep struct {
		Catalog      storeDump   `json:"catalog"`
		DomainStores []storeDump `json:"domain_stores"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Catalog.Error != "" || rep.Catalog.Missing || len(rep.DomainStores) != 1 {
		t.Fatalf("report %s", out)
	}
	for _, want := range []string{`"domain_id": "d001`, `"profile_name": "default"`, `"role": "Network"`, `"Committed"`, `"durable_decision": "Starting"`, `"prepared_artifacts"`} {
		if !strings.Contains(out, want) {
			t.Errorf("dump lacks %s:\n%s", want, out)
		}
	}
	after, _ := os.ReadFile(domainstore.Path(root, id))
	if !bytes.Equal(before, after) {
		t.Fatal("inspect modified the Domain Store")
	}
	out, err = runStoreApp(t, "store", "inspect", "--storage-root", root, "--domain", ids.DomainID{0xee}.String())
	if err != nil || !strings.Contains(out, `"missing": true`) {
		t.Fatalf("inspect of an unknown domain: %v\n%s", err, out)
	}
	if _, err := runStoreApp(t, "store", "inspect", "--storage-root", root, "--domain", "xyz"); err == nil {
		t.Fatal("malformed --domain accepted")
	}
}

func TestStoreInspectDamagedAndQuarantine(t *testing.T) {
	root := t.TempDir()
	id := makeStores(t, root)
	path := domainstore.Path(root, id)
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runStoreApp(t, "store", "inspect", "--storage-root", root)
	var ee *cmdmain.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(out, "is damaged") {
		t.Fatalf("inspect of damaged store: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(path); string(b) != "garbage" {
		t.Fatal("inspect changed the damaged file")
	}
	if _, err := runStoreApp(t, "store", "quarantine", "--storage-root", root, "--catalog"); err == nil {
		t.Fatal("healthy catalog quarantined")
	}
	out, err = runStoreApp(t, "store", "quarantine", "--storage-root", root, "--domain", id.String())
	if err != nil || !strings.Contains(out, "moved damaged store") {
		t.Fatalf("quarantine: %v\n%s", err, out)
	}
	matches, _ := filepath.Glob(path + ".quarantined-*")
	if len(matches) != 1 {
		t.Fatalf("quarantined files %v", matches)
	}
}
