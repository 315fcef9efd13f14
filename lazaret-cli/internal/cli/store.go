package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

func storeCommand() *cli.Command {
	return &cli.Command{
		Name:  "store",
		Usage: "inspect or quarantine the Domain Stores and the Storage Catalog",
		Subcommands: []*cli.Command{
			storeInspectCommand(),
			storeQuarantineCommand(),
		},
	}
}

func domainFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "domain", Usage: usage}
}

func parseDomainID(s string) (ids.DomainID, error) {
	var id ids.DomainID
	if err := ids.ParseHex(id[:], s, "--domain (a 64-digit hexadecimal Domain ID)"); err != nil {
		return id, err
	}
	return id, nil
}

func storeInspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "print every record of the Domain Stores (or one) and of the Storage Catalog as JSON, read-only",
		Flags: []cli.Flag{
			domainFlag("only the Domain Store of this Domain `ID` (64 hexadecimal digits)"),
			configFileFlag(),
			storageRootFlag(),
		},
		Action: runStoreInspect,
	}
}

// inspectReport is the JSON dump. Records appear as their stored CBOR maps
// (schema field names; byte strings as lowercase hex), so the dump shows
// exactly what is stored and nothing else; stores hold no secrets.
type inspectReport struct {
	StorageRoot  string       `json:"storage_root"`
	Catalog      *storeDump   `json:"catalog"`
	DomainStores []*storeDump `json:"domain_stores"`
}

type storeDump struct {
	Path    string         `json:"path"`
	Missing bool           `json:"missing,omitempty"`
	Error   string         `json:"error,omitempty"`
	Records map[string]any `json:"records,omitempty"`
}

func runStoreInspect(c *cli.Context) error {
	r, err := resolveRoots(c, 1)
	if err != nil {
		return err
	}
	root := r.StorageRoot
	rep := inspectReport{StorageRoot: root, DomainStores: []*storeDump{}}
	failed := false
	rep.Catalog = inspectCatalog(root)
	failed = failed || rep.Catalog.Error != ""

	var files []string
	if s := c.String("domain"); s != "" {
		id, err := parseDomainID(s)
		if err != nil {
			return err
		}
		files = []string{domainstore.Path(root, id)}
	} else {
		files, err = domainStoreFiles(root)
		if err != nil {
			return err
		}
	}
	for _, f := range files {
		d := inspectDomainStore(f)
		failed = failed || d.Error != ""
		rep.DomainStores = append(rep.DomainStores, d)
	}
	if err := writeJSON(c.App.Writer, rep); err != nil {
		return err
	}
	if failed {
		return &cmdmain.ExitError{Code: 1}
	}
	return nil
}

// domainStoreFiles lists <root>/domains/<64 hex>.db, sorted; temporary and
// quarantined files are not stores.
func domainStoreFiles(root string) ([]string, error) {
	dir := filepath.Join(root, "domains")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing Domain Stores: %w", err)
	}
	var out []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".db")
		if !ok || len(name) != 64 {
			continue
		}
		if _, err := hex.DecodeString(name); err != nil {
			continue
		}
		out = append(out, filepath.Join(dir, e.Name()))
	}
	sort.Strings(out)
	return out, nil
}

func inspectCatalog(root string) *storeDump {
	d := &storeDump{Path: catalog.Path(root)}
	cat, err := catalog.Open(root, catalog.Options{ReadOnly: true})
	if err != nil {
		return d.fail(err)
	}
	defer cat.Close()
	var contents catalog.Contents
	if err := cat.View(func(tx *catalog.Tx) error { var e error; contents, e = tx.Scan(); return e }); err != nil {
		return d.fail(err)
	}
	recs := map[string]any{}
	for name, v := range map[string]any{"prepared_artifacts": contents.Artifacts, "artifact_leases": contents.Leases, "prepare_operations": contents.Operations} {
		j, err := storedJSON(v)
		if err != nil {
			return d.fail(err)
		}
		recs[name] = j
	}
	d.Records = recs
	return d
}

func inspectDomainStore(path string) *storeDump {
	d := &storeDump{Path: path}
	s, err := domainstore.OpenFile(path, domainstore.Options{ReadOnly: true})
	if err != nil {
		return d.fail(err)
	}
	defer s.Close()
	var contents domainstore.Contents
	if err := s.View(func(tx *domainstore.Tx) error { var e error; contents, e = tx.Scan(); return e }); err != nil {
		return d.fail(err)
	}
	recs := map[string]any{}
	dom, err := storedJSON(contents.Domain)
	if err != nil {
		return d.fail(err)
	}
	recs["domain"] = dom
	var gens []any
	for _, g := range contents.Generations {
		gj := map[string]any{}
		for name, v := range map[string]any{"generation": g.Generation, "participants": g.Participants, "sessions": g.Sessions, "session_terminals": g.Terminals, "mailbox": g.Mailbox} {
			j, err := storedJSON(v)
			if err != nil {
				return d.fail(err)
			}
			gj[name] = j
		}
		gens = append(gens, gj)
	}
	if gens == nil {
		gens = []any{}
	}
	recs["generations"] = gens
	d.Records = recs
	return d
}

func (d *storeDump) fail(err error) *storeDump {
	if errors.Is(err, store.ErrNotFound) {
		d.Missing = true
		return d
	}
	d.Error = err.Error()
	return d
}

// storedJSON renders v as it is stored: its canonical CBOR encoding decoded
// into plain values, byte strings shown as hex.
func storedJSON(v any) (any, error) {
	b, err := codec.Marshal(v)
	if err != nil {
		return nil, err
	}
	g, err := codec.Generic(b)
	if err != nil {
		return nil, err
	}
	return jsonable(g), nil
}

func jsonable(v any) any {
	switch x := v.(type) {
	case []byte:
		return hex.EncodeToString(x)
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func storeQuarantineCommand() *cli.Command {
	return &cli.Command{
		Name:  "quarantine",
		Usage: "move a damaged store file aside (refused unless the file fails the damage check)",
		Flags: []cli.Flag{
			domainFlag("the Domain Store of this Domain `ID` (64 hexadecimal digits)"),
			&cli.BoolFlag{Name: "catalog", Usage: "the Storage Catalog"},
			configFileFlag(),
			storageRootFlag(),
		},
		Action: runStoreQuarantine,
	}
}

func runStoreQuarantine(c *cli.Context) error {
	r, err := resolveRoots(c, 1)
	if err != nil {
		return err
	}
	root := r.StorageRoot
	var path string
	var schema store.Schema
	switch dom := c.String("domain"); {
	case dom != "" && c.Bool("catalog"), dom == "" && !c.Bool("catalog"):
		return errors.New("store quarantine: give exactly one of --domain ID or --catalog")
	case dom != "":
		id, err := parseDomainID(dom)
		if err != nil {
			return err
		}
		path, schema = domainstore.Path(root, id), store.DomainStoreSchema
	default:
		path, schema = catalog.Path(root), store.StorageCatalogSchema
	}
	dst, err := store.Quarantine(path, schema, store.Options{})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "moved damaged store %q to %q\n", path, dst)
	return nil
}
