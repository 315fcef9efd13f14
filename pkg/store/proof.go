package store

// AbsenceProof is a caller's explicit statement that runtime absence of
// everything a record describes has been proven independently (the sealed
// runtime-absence check: processes gone by pidfs authority, mounts and
// namespaces gone by identity). Transitions to Clean require one; nothing
// else does. The store cannot verify the proof, only that it was given and
// says how it was obtained, so that a clearing write is never accidental.
type AbsenceProof struct {
	// Method names the check that proved absence, for logs and refusals.
	Method string
}

// ProvenAbsent returns a proof naming method.
func ProvenAbsent(method string) *AbsenceProof { return &AbsenceProof{Method: method} }

// Valid reports whether p is a usable proof.
func (p *AbsenceProof) Valid() bool { return p != nil && p.Method != "" }
