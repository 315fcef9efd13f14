package protocol

import (
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// ClientEnrollmentRequest asks the Host Coordinator to certify a CLI's TLS
// key. CertificateSigningRequestDER is a PKCS #10 CSR that names CLIID (see
// CA.IssueClient).
type ClientEnrollmentRequest struct {
	GenerationIdentity           GenerationIdentity
	CLIID                        ids.CLIID
	CertificateSigningRequestDER []byte
}

// ClientEnrollmentResponse carries the issued ClientCLI TLS credential.
type ClientEnrollmentResponse struct {
	Credential TLSCredential
}

// SessionRegistrationRequest registers a session and its anchor key.
type SessionRegistrationRequest struct {
	SessionBinding SessionBinding
}

// SessionRegistrationResponse carries the session's request capability.
type SessionRegistrationResponse struct {
	SessionCapability SessionRequestCapability
}

// ControlRequestKind selects the variant of a ControlRequest.
type ControlRequestKind uint32

// ControlRequest variants, in order.
const (
	ControlEnroll ControlRequestKind = iota
	ControlRegister
	ControlExecute
	ControlExecuteInteractive
	numControlRequests
)

// ControlRequest is a union: Enroll, Register, Execute
// (NonInteractiveSessionRequest) or ExecuteInteractive
// (InteractiveSessionRequest).
type ControlRequest struct {
	Kind               ControlRequestKind
	Enroll             *ClientEnrollmentRequest
	Register           *SessionRegistrationRequest
	Execute            *NonInteractiveSessionRequest
	ExecuteInteractive *InteractiveSessionRequest
}

// ControlResponseKind selects the variant of a ControlResponse.
type ControlResponseKind uint32

// ControlResponse variants, in order.
const (
	ControlEnrolled ControlResponseKind = iota
	ControlRegistered
	numControlResponses
)

// ControlResponse is a union: Enrolled or Registered.
type ControlResponse struct {
	Kind       ControlResponseKind
	Enrolled   *ClientEnrollmentResponse
	Registered *SessionRegistrationResponse
}

// --- ClientEnrollmentRequest

func (r *ClientEnrollmentRequest) check() (string, error) {
	if field, err := r.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if err := nonzero16(r.CLIID); err != nil {
		return "cli_id", err
	}
	if err := checkBounded(r.CertificateSigningRequestDER, 1, MaxDERBytes); err != nil {
		return "certificate_signing_request_der", err
	}
	return "", nil
}

// Validate checks the fields; CA.IssueClient checks the CSR itself.
func (r *ClientEnrollmentRequest) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError("client-enrollment-request", field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, generation_identity, cli_id,
// certificate_signing_request_der.
func (r *ClientEnrollmentRequest) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.GenerationIdentity.MarshalPostcard(e)
	e.Fixed(r.CLIID[:])
	e.ByteString(r.CertificateSigningRequestDER)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *ClientEnrollmentRequest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.GenerationIdentity.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.CLIID), "cli_id")
	r.CertificateSigningRequestDER = readBounded(d, "certificate_signing_request_der", 1, MaxDERBytes)
}

// --- ClientEnrollmentResponse

// Validate checks that the credential is a valid ClientCLI credential.
func (r *ClientEnrollmentResponse) Validate() error {
	if err := r.Credential.Validate(); err != nil {
		return err
	}
	if r.Credential.Role != TLSRoleClientCLI {
		return fieldError("client-enrollment-response", "credential.role", invalid("role %v is not ClientCLI", r.Credential.Role))
	}
	return nil
}

// MarshalPostcard writes protocol_version, credential.
func (r *ClientEnrollmentResponse) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.Credential.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *ClientEnrollmentResponse) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.Credential.UnmarshalPostcard(d)
	if d.Err() == nil && r.Credential.Role != TLSRoleClientCLI {
		d.Fail("credential.role", invalid("role %v is not ClientCLI", r.Credential.Role))
	}
}

// --- SessionRegistrationRequest

// Validate checks the binding.
func (r *SessionRegistrationRequest) Validate() error { return r.SessionBinding.Validate() }

// MarshalPostcard writes protocol_version, session_binding.
func (r *SessionRegistrationRequest) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *SessionRegistrationRequest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
}

// --- SessionRegistrationResponse

// Validate checks the capability's fields.
func (r *SessionRegistrationResponse) Validate() error { return r.SessionCapability.Validate() }

// MarshalPostcard writes protocol_version, session_capability.
func (r *SessionRegistrationResponse) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionCapability.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *SessionRegistrationResponse) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionCapability.UnmarshalPostcard(d)
}

// --- ControlRequest

// Validate checks that exactly the selected variant is set and valid.
func (u *ControlRequest) Validate() error {
	set := map[ControlRequestKind]bool{
		ControlEnroll: u.Enroll != nil, ControlRegister: u.Register != nil,
		ControlExecute: u.Execute != nil, ControlExecuteInteractive: u.ExecuteInteractive != nil,
	}
	if err := checkUnion("control-request", uint32(u.Kind), uint32(numControlRequests), set); err != nil {
		return err
	}
	switch u.Kind {
	case ControlEnroll:
		return u.Enroll.Validate()
	case ControlRegister:
		return u.Register.Validate()
	case ControlExecute:
		return u.Execute.Validate()
	default:
		return u.ExecuteInteractive.Validate()
	}
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *ControlRequest) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case ControlEnroll:
		orZero(u.Enroll).MarshalPostcard(e)
	case ControlRegister:
		orZero(u.Register).MarshalPostcard(e)
	case ControlExecute:
		orZero(u.Execute).MarshalPostcard(e)
	case ControlExecuteInteractive:
		orZero(u.ExecuteInteractive).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *ControlRequest) UnmarshalPostcard(d *postcard.Decoder) {
	*u = ControlRequest{Kind: ControlRequestKind(d.Variant(uint32(numControlRequests)))}
	if d.Err() != nil {
		return
	}
	switch u.Kind {
	case ControlEnroll:
		u.Enroll = new(ClientEnrollmentRequest)
		u.Enroll.UnmarshalPostcard(d)
	case ControlRegister:
		u.Register = new(SessionRegistrationRequest)
		u.Register.UnmarshalPostcard(d)
	case ControlExecute:
		u.Execute = new(NonInteractiveSessionRequest)
		u.Execute.UnmarshalPostcard(d)
	case ControlExecuteInteractive:
		u.ExecuteInteractive = new(InteractiveSessionRequest)
		u.ExecuteInteractive.UnmarshalPostcard(d)
	}
}

// --- ControlResponse

// Validate checks that exactly the selected variant is set and valid.
func (u *ControlResponse) Validate() error {
	set := map[ControlResponseKind]bool{ControlEnrolled: u.Enrolled != nil, ControlRegistered: u.Registered != nil}
	if err := checkUnion("control-response", uint32(u.Kind), uint32(numControlResponses), set); err != nil {
		return err
	}
	if u.Kind == ControlEnrolled {
		return u.Enrolled.Validate()
	}
	return u.Registered.Validate()
}

// MarshalPostcard writes the variant index and the selected payload.
func (u *ControlResponse) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(u.Kind))
	switch u.Kind {
	case ControlEnrolled:
		orZero(u.Enrolled).MarshalPostcard(e)
	case ControlRegistered:
		orZero(u.Registered).MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads the variant index and its payload.
func (u *ControlResponse) UnmarshalPostcard(d *postcard.Decoder) {
	*u = ControlResponse{Kind: ControlResponseKind(d.Variant(uint32(numControlResponses)))}
	if d.Err() != nil {
		return
	}
	if u.Kind == ControlEnrolled {
		u.Enrolled = new(ClientEnrollmentResponse)
		u.Enrolled.UnmarshalPostcard(d)
		return
	}
	u.Registered = new(SessionRegistrationResponse)
	u.Registered.UnmarshalPostcard(d)
}
