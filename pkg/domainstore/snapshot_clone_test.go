package domainstore

import "testing"

func TestOwnershipClone(t *testing.T) {
	if (*ParticipantOwnership)(nil).Clone() != nil {
		t.Fatal("nil clones to non-nil")
	}
	for _, r := range []Role{RolePreparedLower, RoleStateAnchor, RoleGitRouting, RoleNetwork, RoleHelper, RoleSandbox, RolePublication} {
		t.Run(r.String(), func(t *testing.T) {
			o := EmptyOwnership(r)
			c := o.Clone()
			if c == o {
				t.Fatal("Clone returned its receiver")
			}
			// Exactly one variant is set, and the clone's is a new struct.
			set := 0
			for _, pair := range [][2]any{
				{o.PreparedLower, c.PreparedLower}, {o.StateAnchor, c.StateAnchor}, {o.GitRouting, c.GitRouting},
				{o.Network, c.Network}, {o.Helper, c.Helper}, {o.Sandbox, c.Sandbox}, {o.Publication, c.Publication},
			} {
				if isNil(pair[0]) != isNil(pair[1]) {
					t.Fatalf("variant presence differs: %v vs %v", pair[0], pair[1])
				}
				if !isNil(pair[0]) {
					set++
					if pair[0] == pair[1] {
						t.Fatal("the clone shares the variant struct")
					}
				}
			}
			if set != 1 {
				t.Fatalf("%d variants set", set)
			}
		})
	}
}

func isNil(v any) bool {
	switch p := v.(type) {
	case *PreparedLowerOwnership:
		return p == nil
	case *StateAnchorOwnership:
		return p == nil
	case *GitRoutingOwnership:
		return p == nil
	case *NetworkOwnership:
		return p == nil
	case *HelperOwnership:
		return p == nil
	case *SandboxOwnership:
		return p == nil
	case *PublicationOwnership:
		return p == nil
	}
	return v == nil
}
