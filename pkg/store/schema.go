package store

import (
	"fmt"

	"lazaret.dev/pkg/store/codec"
)

// Schema is a store's identity and version as recorded in its metadata.
type Schema struct {
	ID      string
	Version uint64
}

func (s Schema) String() string { return fmt.Sprintf("%s version %d", s.ID, s.Version) }

// The schemas this program reads and writes.
var (
	DomainStoreSchema    = Schema{ID: "lazaret-domain-store-v1", Version: 1}
	StorageCatalogSchema = Schema{ID: "lazaret-storage-catalog-v1", Version: 1}
)

// Metadata bucket and key. The bucket holds exactly one record.
var (
	metadataBucket = []byte("metadata")
	metadataKey    = []byte("store")
)

// StoreMetadata is the metadata record of every store.
type StoreMetadata struct {
	SchemaID      string `cbor:"schema_id"`
	SchemaVersion uint64 `cbor:"schema_version"`
}

// encodeMetadata returns the stored bytes for s.
func encodeMetadata(s Schema) ([]byte, error) {
	return codec.Marshal(StoreMetadata{SchemaID: s.ID, SchemaVersion: s.Version})
}

// compareMetadata classifies raw metadata (nil when absent) against want.
// The metadata record is decoded openly (unknown keys ignored) because it is
// the version gate: a newer store may carry more metadata fields, and must
// still be reported as newer rather than as garbage.
func compareMetadata(path string, raw []byte, want Schema) error {
	if raw == nil {
		return &SchemaError{Path: path, Problem: SchemaUnversioned, Want: want, Detail: "no metadata record"}
	}
	var m StoreMetadata
	if err := codec.UnmarshalOpen(raw, &m); err != nil {
		return &SchemaError{Path: path, Problem: SchemaUnreadable, Want: want, Detail: err.Error()}
	}
	if m.SchemaID == "" || m.SchemaVersion == 0 {
		return &SchemaError{Path: path, Problem: SchemaUnversioned, Want: want, Detail: "metadata lacks schema_id or schema_version"}
	}
	got := Schema{ID: m.SchemaID, Version: m.SchemaVersion}
	switch {
	case got.ID != want.ID:
		return &SchemaError{Path: path, Problem: SchemaUnknown, Want: want, Got: got}
	case got.Version < want.Version:
		return &SchemaError{Path: path, Problem: SchemaOlder, Want: want, Got: got}
	case got.Version > want.Version:
		return &SchemaError{Path: path, Problem: SchemaNewer, Want: want, Got: got}
	}
	return nil
}
