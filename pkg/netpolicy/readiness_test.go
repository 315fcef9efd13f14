package netpolicy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// The golden readiness identity, field by field: the schema ID as a
// length-prefixed string, the identifiers and digests as fixed arrays, the
// namespace device and inode as u64 LEB128 varints (4026532008 =
// 0xf00000a8 = a8 81 80 80 0f). The policy digest is the golden policy's.
const identityGoldenHex = "" +
	"25" + "6c617a617265742d6e6574776f726b2d72656164696e6573732d6964656e746974792d7631" + // schema_id: 37 bytes
	"1111111111111111111111111111111111111111111111111111111111111111" + // domain_id
	"22222222222222222222222222222222" + // generation_id
	"3333333333333333333333333333333333333333333333333333333333333333" + // configuration_fingerprint
	"44444444444444444444444444444444" + // network_sidecar_id
	"6e3bde562849b046d242f15cf74be782d2c45eba0123fa25b45f338073225bb1" + // derived_policy_digest
	"04" + "a88180800f" // enforcement_namespace: device 4, inode 4026532008

func TestIdentityGolden(t *testing.T) {
	want, _ := hex.DecodeString(identityGoldenHex)
	if file := readHex(t, "readiness_identity_v1.hex"); !bytes.Equal(file, want) {
		t.Fatalf("testdata/readiness_identity_v1.hex = %x, want the annotated %x", file, want)
	}
	att, _ := exampleReadiness()
	id, err := att.Project()
	if err != nil {
		t.Fatalf("Project: %v", err)
	}
	got, err := id.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x\nwant       %x", got, want)
	}
	fp, err := id.Fingerprint()
	if err != nil {
		t.Fatalf("Fingerprint: %v", err)
	}
	wantFP := strings.TrimSpace(string(must(os.ReadFile(filepath.Join("testdata", "readiness_identity_v1.fingerprint")))))
	if fp.String() != wantFP {
		t.Fatalf("fingerprint = %v, want %s", fp, wantFP)
	}
	if w := exampleExpected(); w.ReadinessFingerprint() != fp || w.Identity() != id {
		t.Fatal("Expected computes another identity or fingerprint than the attestation projects")
	}
	back, err := DecodeIdentity(got)
	if err != nil || *back != id {
		t.Fatalf("DecodeIdentity = %+v, %v", back, err)
	}
	// The policy digest in the identity is the golden policy's digest.
	if pd, _ := examplePolicy(t).Digest(); pd != id.DerivedPolicyDigest {
		t.Fatalf("fixture policy digest %v is not the golden policy's %v", id.DerivedPolicyDigest, pd)
	}
}

func TestReadinessRoundTrips(t *testing.T) {
	att, probe := exampleReadiness()
	ev, err := Bind(exampleExpected(), att, probe)
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	t.Run("attestation", func(t *testing.T) {
		b, err := att.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeAttestation(b)
		if err != nil || !reflect.DeepEqual(back, att) {
			t.Fatalf("DecodeAttestation = %+v, %v", back, err)
		}
		if again := postcard.Marshal(back); !bytes.Equal(again, b) {
			t.Fatal("re-encoding differs")
		}
	})
	t.Run("probe", func(t *testing.T) {
		b, err := probe.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeProbe(b)
		if err != nil || !reflect.DeepEqual(back, probe) {
			t.Fatalf("DecodeProbe = %+v, %v", back, err)
		}
	})
	t.Run("evidence", func(t *testing.T) {
		b, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeEvidence(b)
		if err != nil || !reflect.DeepEqual(back, ev) {
			t.Fatalf("DecodeEvidence = %+v, %v", back, err)
		}
		if err := back.Verify(exampleExpected()); err != nil {
			t.Fatalf("Verify of decoded evidence: %v", err)
		}
		other := exampleExpected()
		other.GenerationID[0] ^= 1
		var me *MismatchError
		if err := back.Verify(other); !errors.As(err, &me) || me.Field != "generation_id" {
			t.Fatalf("Verify against another generation = %v", err)
		}
	})
}

func TestSchemaDispatch(t *testing.T) {
	att, _ := exampleReadiness()
	t.Run("attestation with identity schema", func(t *testing.T) {
		a := *att
		a.SchemaID = IdentitySchemaID
		if _, err := a.Project(); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("Project = %v", err)
		}
		if _, err := DecodeAttestation(postcard.Marshal(&a)); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("DecodeAttestation = %v", err)
		}
	})
	t.Run("attestation v2", func(t *testing.T) {
		a := *att
		a.SchemaID = "lazaret-network-attestation-v2"
		var se *SchemaError
		if _, err := a.Project(); !errors.As(err, &se) || se.Got != a.SchemaID || se.Want != AttestationSchemaID {
			t.Fatalf("Project = %v", err)
		}
	})
	t.Run("identity with attestation schema", func(t *testing.T) {
		id, _ := att.Project()
		id.SchemaID = AttestationSchemaID
		if _, err := id.Fingerprint(); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("Fingerprint = %v", err)
		}
		if _, err := id.Encode(); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("Encode = %v", err)
		}
		if _, err := DecodeIdentity(postcard.Marshal(&id)); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("DecodeIdentity = %v", err)
		}
	})
	t.Run("identity v0", func(t *testing.T) {
		id, _ := att.Project()
		id.SchemaID = "lazaret-network-readiness-identity-v0"
		if _, err := DecodeIdentity(postcard.Marshal(&id)); !errors.Is(err, ErrSchemaID) {
			t.Fatalf("DecodeIdentity = %v", err)
		}
	})
}

func TestBindRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe)
		want   error
		field  string // MismatchError field, or TargetError target, or FieldError field
	}{
		{"attestation schema", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.SchemaID = IdentitySchemaID
		}, ErrSchemaID, ""},
		{"other domain", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.DomainID[31] ^= 1
		}, ErrMismatch, "domain_id"},
		{"other generation", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.GenerationID[0] ^= 1
		}, ErrMismatch, "generation_id"},
		{"other configuration", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.ConfigurationFingerprint[5] ^= 1
		}, ErrMismatch, "configuration_fingerprint"},
		{"other sidecar", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.NetworkSidecarID[5] ^= 1
		}, ErrMismatch, "network_sidecar_id"},
		{"other policy", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.DerivedPolicyDigest[0] ^= 1
		}, ErrMismatch, "derived_policy_digest"},
		{"other namespace", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.EnforcementNamespace.Inode++
		}, ErrMismatch, "enforcement_namespace"},
		{"other runtime supervisor", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.RuntimeSupervisor.Authority.PidfsInode++
		}, ErrMismatch, "runtime_supervisor"},
		{"runtime supervisor with other start time", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.RuntimeSupervisor.StartTimeTicks++
		}, ErrMismatch, "runtime_supervisor"},
		{"other connectivity helper", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.ConnectivityHelper.HostPID++
		}, ErrMismatch, "connectivity_helper"},
		{"probe of another generation", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.GenerationID[3] ^= 1
		}, ErrMismatch, "generation_id"},
		{"probe in another namespace", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.EnforcementNamespace.Device++
		}, ErrMismatch, "enforcement_namespace"},
		{"helper not ready", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.Observation.HelperReady = false
		}, ErrHelperNotReady, "observation.helper_ready"},
		{"routes not attested", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.Observation.RoutesAttested = false
		}, ErrRoutesNotAttested, "observation.routes_attested"},
		{"no routes observed", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			a.Observation.ObservedRoutes = nil
		}, ErrRoutesNotAttested, "observation.routes_attested"},
		{"unsorted routes", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			r := a.Observation.ObservedRoutes
			r[0], r[1] = r[1], r[0]
		}, ErrUnsorted, "observation.observed_routes[1]"},
		{"denied target reachable", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.Denied[1].Unreachable = false
		}, ErrTargetReachable, "198.51.100.7:443"},
		{"permitted target unreachable", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.Permitted[0].Reachable = false
		}, ErrTargetUnreachable, "10.1.2.3:22"},
		{"DNS target unresolved", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.DNS[1].ResolvedAddresses = nil
		}, ErrTargetUnresolved, `"example.test" via 192.0.2.53`},
		{"denied target not probed", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			w.Targets.Denied = append(w.Targets.Denied, dst("198.51.100.8:443"))
		}, ErrTargetNotProbed, "198.51.100.8:443"},
		{"permitted target not probed", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			w.Targets.Permitted = append(w.Targets.Permitted, dst("203.0.113.10:80"))
		}, ErrTargetNotProbed, "203.0.113.10:80"},
		{"DNS target not probed", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			w.Targets.DNS = append(w.Targets.DNS, DNSTarget{Resolver: addr("192.0.2.53"), Query: "other.test"})
		}, ErrTargetNotProbed, `"other.test" via 192.0.2.53`},
		{"probe of an unconfigured target", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			w.Targets.Permitted = w.Targets.Permitted[:1]
		}, ErrTargetNotConfigured, "10.1.2.3:22"},
		{"unsorted probe", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.Denied[0], p.Denied[1] = p.Denied[1], p.Denied[0]
		}, ErrUnsorted, "denied[1]"},
		{"duplicate observation", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.DNS[1] = p.DNS[0]
		}, ErrDuplicate, "dns[1]"},
		{"empty probe list", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.Permitted = nil
		}, ErrTargetNotProbed, "permitted"},
		{"zero port", func(w *Expected, a *NetworkReadinessAttestation, p *NetworkReachabilityProbe) {
			p.Denied[0].Destination.Port = 0
			w.Targets.Denied[1].Port = 0
		}, ErrZeroPort, "denied[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := exampleExpected()
			a, p := exampleReadiness()
			tc.mutate(w, a, p)
			ev, err := Bind(w, a, p)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Bind = %v, %v; want %v", ev, err, tc.want)
			}
			var (
				me *MismatchError
				te *TargetError
				fe *FieldError
			)
			switch {
			case tc.field == "":
			case errors.As(err, &me):
				if me.Field != tc.field {
					t.Fatalf("mismatch names %q, want %q: %v", me.Field, tc.field, err)
				}
			case errors.As(err, &te):
				if te.Target != tc.field {
					t.Fatalf("target error names %q, want %q: %v", te.Target, tc.field, err)
				}
			case errors.As(err, &fe):
				if fe.Field != tc.field {
					t.Fatalf("field error names %q, want %q: %v", fe.Field, tc.field, err)
				}
			default:
				t.Fatalf("error %v is not typed", err)
			}
		})
	}
}

func TestBindCopies(t *testing.T) {
	a, p := exampleReadiness()
	ev, err := Bind(exampleExpected(), a, p)
	if err != nil {
		t.Fatal(err)
	}
	p.DNS[0].ResolvedAddresses[0] = addr("198.51.100.1")
	a.Observation.ObservedRoutes[0] = pfx("10.0.0.0/8")
	if err := ev.Verify(exampleExpected()); err != nil {
		t.Fatalf("evidence changed with its inputs: %v", err)
	}
	if ev.Probe.DNS[0].ResolvedAddresses[0] != addr("203.0.113.10") {
		t.Fatal("evidence shares the probe's slices")
	}
}

func TestDecodeEvidenceRejectsTampering(t *testing.T) {
	a, p := exampleReadiness()
	ev, err := Bind(exampleExpected(), a, p)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(e *NetworkReadinessEvidence)
		want   error
	}{
		{"fingerprint", func(e *NetworkReadinessEvidence) { e.ReadinessFingerprint[0] ^= 1 }, ErrMismatch},
		{"generation", func(e *NetworkReadinessEvidence) { e.GenerationID[0] ^= 1 }, ErrMismatch},
		{"attested generation", func(e *NetworkReadinessEvidence) { e.Attestation.GenerationID[0] ^= 1 }, ErrMismatch},
		{"attested policy", func(e *NetworkReadinessEvidence) { e.Attestation.DerivedPolicyDigest[0] ^= 1 }, ErrMismatch},
		{"attested supervisor ignored by fingerprint", func(e *NetworkReadinessEvidence) { e.Attestation.RuntimeSupervisor.HostPID++ }, nil},
		{"probe result", func(e *NetworkReadinessEvidence) { e.Probe.Denied[0].Unreachable = false }, ErrTargetReachable},
		{"attestation schema", func(e *NetworkReadinessEvidence) { e.Attestation.SchemaID = "lazaret-network-attestation-v0" }, ErrSchemaID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := *ev
			c.Attestation = cloneAttestation(&ev.Attestation)
			c.Probe = cloneProbe(&ev.Probe)
			tc.mutate(&c)
			_, err := DecodeEvidence(postcard.Marshal(&c))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("DecodeEvidence = %v", err)
				}
				// Self-consistent, but not the committed supervisor.
				if err := c.Verify(exampleExpected()); !errors.Is(err, ErrMismatch) {
					t.Fatalf("Verify = %v, want a runtime_supervisor mismatch", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodeEvidence = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecodeProbeRejectsBytes(t *testing.T) {
	_, p := exampleReadiness()
	b, _ := p.Encode()
	// The first denied destination starts after domain_id (32), generation_id
	// (16), namespace (1 + 5) and the list count (1): offset 55. Its port 80
	// is one varint byte at 59, its bool at 60.
	edit := func(off int, v ...byte) []byte {
		c := bytes.Clone(b)
		copy(c[off:], v)
		return c
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"bad bool", edit(60, 2), postcard.ErrInvalidBool},
		{"zero port", edit(59, 0), ErrZeroPort},
		// A byte after a v1 probe begins a name section; one byte is not one.
		{"trailing", append(bytes.Clone(b), 0), postcard.ErrTruncated},
		{"truncated", b[:len(b)-2], postcard.ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeProbe(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeProbe = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestErrorMessagesNameTheTarget(t *testing.T) {
	w := exampleExpected()
	a, p := exampleReadiness()
	p.Permitted[1].Reachable = false
	_, err := Bind(w, a, p)
	want := "binding network readiness: readiness permitted target 203.0.113.10:443: unreachable from inside the enforcement path"
	if err == nil || err.Error() != want {
		t.Fatalf("message = %q, want %q", err, want)
	}
}
