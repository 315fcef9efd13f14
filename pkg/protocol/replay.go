package protocol

import (
	"sync"

	"lazaret.dev/pkg/ids"
)

// DefaultReplayLimit is the replay guard capacity when none is given. Each
// entry is a 32-byte key in a Go map, well under 100 bytes with overhead,
// so the default bounds the guard to a few MiB.
const DefaultReplayLimit = 1 << 16

// ReplayGuard remembers the request IDs consumed in each generation and
// refuses a second use. Its memory is bounded: it holds at most limit IDs
// in total and, when full, refuses every new ID with KindReplayCapacity
// rather than forgetting old ones, because forgetting would let a recorded
// request be replayed. ForgetGeneration frees the IDs of an ended
// generation; that is safe because records of a generation verify only
// under that generation's credentials, which no later Verifier trusts.
//
// A ReplayGuard is safe for concurrent use.
type ReplayGuard struct {
	mu    sync.Mutex
	limit int
	seen  map[replayKey]struct{}
}

type replayKey struct {
	generation ids.GenerationID
	request    ids.RequestID
}

// NewReplayGuard returns a guard for at most limit request IDs;
// limit <= 0 means DefaultReplayLimit.
func NewReplayGuard(limit int) *ReplayGuard {
	if limit <= 0 {
		limit = DefaultReplayLimit
	}
	return &ReplayGuard{limit: limit, seen: make(map[replayKey]struct{})}
}

// Consume records the request ID for the generation, or fails with
// KindReplay if it was already consumed, or with KindReplayCapacity if the
// guard is full.
func (g *ReplayGuard) Consume(generation ids.GenerationID, request ids.RequestID) error {
	k := replayKey{generation, request}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.seen[k]; ok {
		return newError(KindReplay, "mailbox-request", "request_id", "request %v was already used in generation %v", request, generation)
	}
	if len(g.seen) >= g.limit {
		return newError(KindReplayCapacity, "mailbox-request", "request_id", "%d request IDs recorded, the limit", g.limit)
	}
	g.seen[k] = struct{}{}
	return nil
}

// Seen reports whether the request ID was consumed in the generation.
func (g *ReplayGuard) Seen(generation ids.GenerationID, request ids.RequestID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.seen[replayKey{generation, request}]
	return ok
}

// Len is the number of IDs held.
func (g *ReplayGuard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

// ForgetGeneration drops every ID of an ended generation.
func (g *ReplayGuard) ForgetGeneration(generation ids.GenerationID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.seen {
		if k.generation == generation {
			delete(g.seen, k)
		}
	}
}
