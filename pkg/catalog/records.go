package catalog

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

// ArtifactState is a prepared artifact's state.
type ArtifactState uint8

// Artifact states.
const (
	ArtifactAvailable ArtifactState = iota + 1
	ArtifactReclaiming
)

var artifactNames = []string{"", "Available", "Reclaiming"}

func (s ArtifactState) String() string { return codec.EnumName(s, artifactNames) }
func (s ArtifactState) Valid() bool    { return codec.EnumValid(s, artifactNames) }
func (s ArtifactState) MarshalText() ([]byte, error) {
	return codec.EnumText(s, artifactNames, "artifact state")
}
func (s *ArtifactState) UnmarshalText(b []byte) error {
	v, err := codec.EnumParse[ArtifactState](b, artifactNames, "artifact state")
	if err == nil {
		*s = v
	}
	return err
}

// PrepareStageState is a prepare operation's stage state.
type PrepareStageState uint8

// Stage states.
const (
	StageIntent PrepareStageState = iota + 1
	StageOwned
)

var stageNames = []string{"", "Intent", "Owned"}

func (s PrepareStageState) String() string { return codec.EnumName(s, stageNames) }
func (s PrepareStageState) Valid() bool    { return codec.EnumValid(s, stageNames) }
func (s PrepareStageState) MarshalText() ([]byte, error) {
	return codec.EnumText(s, stageNames, "stage state")
}
func (s *PrepareStageState) UnmarshalText(b []byte) error {
	v, err := codec.EnumParse[PrepareStageState](b, stageNames, "stage state")
	if err == nil {
		*s = v
	}
	return err
}

// PreparedArtifact is an unpacked image, ready to be an overlay lower
// layer, owned by the catalog and leased per generation.
type PreparedArtifact struct {
	PreparedArtifactID     ids.Digest    `cbor:"prepared_artifact_id"`
	SourceIdentity         ids.Digest    `cbor:"source_identity"`
	SelectedManifestDigest ids.Digest    `cbor:"selected_manifest_digest"`
	PolicyID               ids.Digest    `cbor:"policy_id"`
	IDMapDigest            ids.Digest    `cbor:"id_map_digest"`
	Path                   string        `cbor:"path"`
	Device                 uint64        `cbor:"device"`
	Inode                  uint64        `cbor:"inode"`
	State                  ArtifactState `cbor:"state"`
}

// ArtifactLease is one generation's use of one prepared artifact.
type ArtifactLease struct {
	PreparedArtifactID ids.Digest       `cbor:"prepared_artifact_id"`
	DomainID           ids.DomainID     `cbor:"domain_id"`
	GenerationID       ids.GenerationID `cbor:"generation_id"`
}

// PrepareOperation is a durable record of preparing one artifact in a
// stage directory: Intent before the stage exists, Owned (with the stage's
// device and inode) once it does.
type PrepareOperation struct {
	OperationID            ids.OperationID   `cbor:"operation_id"`
	ExpectedArtifactID     ids.Digest        `cbor:"expected_artifact_id"`
	SourceIdentity         ids.Digest        `cbor:"source_identity"`
	SelectedManifestDigest ids.Digest        `cbor:"selected_manifest_digest"`
	PolicyID               ids.Digest        `cbor:"policy_id"`
	IDMapDigest            ids.Digest        `cbor:"id_map_digest"`
	StagePath              string            `cbor:"stage_path"`
	StageState             PrepareStageState `cbor:"stage_state"`
	Device                 *uint64           `cbor:"device,omitempty"`
	Inode                  *uint64           `cbor:"inode,omitempty"`
}

func invalid(record, key, field, format string, args ...any) error {
	return &store.RecordError{Record: record, Key: key, Field: field, Class: store.ErrInvalidRecord, Err: fmt.Errorf(format, args...)}
}

func refuse(class error, record, key, field, format string, args ...any) error {
	return &store.RecordError{Record: record, Key: key, Field: field, Class: class, Err: fmt.Errorf(format, args...)}
}

func pathProblem(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8 (stored text must be UTF-8)")
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	case s[0] != '/':
		return fmt.Errorf("path %q is not absolute", s)
	}
	return nil
}

type digestField struct {
	name string
	v    ids.Digest
}

func checkDigests(record, key string, ds []digestField) error {
	for _, d := range ds {
		if d.v == (ids.Digest{}) {
			return invalid(record, key, d.name, "is zero")
		}
	}
	return nil
}

// Key names the artifact in errors.
func (a *PreparedArtifact) Key() string { return "artifact " + a.PreparedArtifactID.String() }

// Validate checks the artifact's fields.
func (a *PreparedArtifact) Validate() error {
	const rec = "prepared artifact"
	if err := checkDigests(rec, a.Key(), []digestField{
		{"prepared_artifact_id", a.PreparedArtifactID}, {"source_identity", a.SourceIdentity},
		{"selected_manifest_digest", a.SelectedManifestDigest}, {"policy_id", a.PolicyID}, {"id_map_digest", a.IDMapDigest},
	}); err != nil {
		return err
	}
	if err := pathProblem(a.Path); err != nil {
		return invalid(rec, a.Key(), "path", "%v", err)
	}
	if a.Inode == 0 {
		return invalid(rec, a.Key(), "inode", "is zero")
	}
	if !a.State.Valid() {
		return invalid(rec, a.Key(), "state", "value %v is not an artifact state", a.State)
	}
	return nil
}

// Key names the lease in errors.
func (l *ArtifactLease) Key() string {
	return fmt.Sprintf("lease of artifact %v by domain %v generation %v", l.PreparedArtifactID, l.DomainID, l.GenerationID)
}

// Validate checks the lease's fields.
func (l *ArtifactLease) Validate() error {
	const rec = "artifact lease"
	switch {
	case l.PreparedArtifactID == (ids.Digest{}):
		return invalid(rec, l.Key(), "prepared_artifact_id", "is zero")
	case l.DomainID == (ids.DomainID{}):
		return invalid(rec, l.Key(), "domain_id", "is zero")
	case l.GenerationID == (ids.GenerationID{}):
		return invalid(rec, l.Key(), "generation_id", "is zero")
	}
	return nil
}

// Key names the operation in errors.
func (o *PrepareOperation) Key() string { return "operation " + o.OperationID.String() }

// Validate checks the operation's fields, including that device and inode
// are absent in Intent and both present in Owned.
func (o *PrepareOperation) Validate() error {
	const rec = "prepare operation"
	if o.OperationID == (ids.OperationID{}) {
		return invalid(rec, o.Key(), "operation_id", "is zero")
	}
	if err := checkDigests(rec, o.Key(), []digestField{
		{"expected_artifact_id", o.ExpectedArtifactID}, {"source_identity", o.SourceIdentity},
		{"selected_manifest_digest", o.SelectedManifestDigest}, {"policy_id", o.PolicyID}, {"id_map_digest", o.IDMapDigest},
	}); err != nil {
		return err
	}
	if err := pathProblem(o.StagePath); err != nil {
		return invalid(rec, o.Key(), "stage_path", "%v", err)
	}
	switch o.StageState {
	case StageIntent:
		if o.Device != nil || o.Inode != nil {
			return invalid(rec, o.Key(), "device", "an Intent operation has no device or inode: its stage does not exist yet")
		}
	case StageOwned:
		if o.Device == nil || o.Inode == nil {
			return refuse(store.ErrMissingEvidence, rec, o.Key(), "device", "an Owned operation records both the stage's device and inode")
		}
		if *o.Inode == 0 {
			return invalid(rec, o.Key(), "inode", "is zero")
		}
	default:
		return invalid(rec, o.Key(), "stage_state", "value %v is not a stage state", o.StageState)
	}
	return nil
}
