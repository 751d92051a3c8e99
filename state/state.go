package state

import (
	"context"
	"errors"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// Scope is one conversation of one tenant. Tenant is a hash of the client's credentials,
// so that two tenants whose session ids collide never see each other's state.
type Scope struct {
	Tenant  string
	Session string
}

// Record is one settled decision about a run of canonical messages: the Count
// consecutive messages that start with the message whose id is ID, and whose canonical
// JSON hashes to Fingerprint, were settled at an Event (tool.after or turn.start). Either
// the model saw them as they were (Unchanged), or it saw Items instead. The id alone is not
// enough: a client that changed the message sent new content, which is decided anew.
// Record is plain JSON so that a shared store keeps it as it is.
type Record struct {
	ID          string        `json:"id"`                  // canonical id of the first original message
	Count       int           `json:"count"`               // original messages covered (1 for a tool result)
	Fingerprint string        `json:"fingerprint"`         // sha256 (hex) of the originals' canonical JSON
	Unchanged   bool          `json:"unchanged,omitempty"` // settled without an edit: nothing to re-apply
	Items       []ahp.Message `json:"items,omitempty"`     // the effective messages the model saw instead
	Event       string        `json:"event"`               // the boundary that settled it
	// Parent, on a link record (Count 0, ID from LinkID), is the event id that ID's
	// derived id stands for: a tool.before that rewrote its call's input was derived from
	// the original input, while the history the agent sends back holds the rewritten one,
	// so the tool.after of that call finds its parent through the link.
	Parent string `json:"parent,omitempty"`
}

// LinkID is the record id of the link from a derived event id (see Record.Parent).
func LinkID(derivedEventID string) string { return "link:" + derivedEventID }

// Deferral names a queue of injections waiting for a later model call.
type Deferral string

const (
	// NextCall holds "now" injections accepted at tool.before: the next model call is the
	// next request of the conversation.
	NextCall Deferral = "next_call"
	// NextTurn holds inject deliverAt next_turn: the first model call of the next prompt.
	NextTurn Deferral = "next_turn"
)

// Snapshot is what one request reads from the store.
type Snapshot struct {
	// Records is read-only, the list and each record's items: a store may share it with
	// what it remembers (the memory store's load memo extends it for the next request).
	Records  []Record
	NextCall []ahp.Message // taken: no other request receives them
	NextTurn []ahp.Message // taken, when asked for
}

// put sets the messages taken from queue k.
func (s *Snapshot) put(k Deferral, msgs []ahp.Message) {
	switch k {
	case NextCall:
		s.NextCall = msgs
	case NextTurn:
		s.NextTurn = msgs
	}
}

// Store keeps the conversation state. Implementations are safe for concurrent use and
// across processes when shared.
type Store interface {
	// Load returns scope's records of the messages whose ids are in ids (the request's
	// messages: what a request reads is bounded by what it carries), in the order of ids,
	// one for each position whose id has a record (an id listed twice, twice), and takes
	// the injections pending under each of take, in one round trip; it keeps nothing of
	// ids once it returns. The take is atomic: an injection is returned by exactly one Load
	// (an injection with a later deliverAt is delivered once). Load counts as a use: the
	// time bound of the scope's state runs from its last use.
	Load(ctx context.Context, scope Scope, ids []string, take ...Deferral) (Snapshot, error)
	// Record stores recs; a record replaces any earlier one with the same ID (the latest
	// settled decision about a message wins). A record too large for the store is not
	// kept (its content is settled again when it comes back) and reported as ErrTooLarge.
	Record(ctx context.Context, scope Scope, recs []Record) error
	// Defer appends msgs to the injections pending under kind.
	Defer(ctx context.Context, scope Scope, kind Deferral, msgs []ahp.Message) error
	// Close releases the store's connections.
	Close() error
}

// ErrTooLarge reports a record or injection beyond the store's bound on one value. It is
// not an outage: what was not kept is settled again.
var ErrTooLarge = errors.New("state: value too large for the store")

// Bounds shared by the stores.
const (
	// MaxRecordsPerScope bounds one conversation; records beyond it are dropped (and
	// their content settled again when it is sent again).
	MaxRecordsPerScope = 4096
	// MaxPendingPerKind bounds one queue of deferred injections; the oldest are dropped.
	MaxPendingPerKind = 256
	// MaxValueBytes bounds one record or injection kept in a shared store.
	MaxValueBytes = 1 << 20
)
