package approvals

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"
)

// States of a record. A record leaves pending exactly once.
const (
	StatePending  = "pending"
	StateApproved = "approved"
	StateDenied   = "denied"
	StateExpired  = "expired"
)

// Decisions a person sends.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

// TimedOutReason is the reason of a record that expired by its timeout.
const TimedOutReason = "approval timed out"

// AbandonedReason is the reason of a record that expired because the request holding the
// call ended (the client went away) before anyone decided.
const AbandonedReason = "the request ended before a decision"

// Record is one held tool call and what became of it.
type Record struct {
	ID        string     `json:"id"`
	State     string     `json:"state"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	Route     string     `json:"route"`
	Session   string     `json:"session"`
	Tool      Tool       `json:"tool"`
	Digest    string     `json:"digest"`
	AskedBy   []string   `json:"askedBy"`
	Reasons   []string   `json:"reasons"`
	DecidedBy string     `json:"decidedBy,omitempty"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Tool is the held call as it was judged: its name and effective input.
type Tool struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Decided reports whether the record left pending.
func (r Record) Decided() bool { return r.State != StatePending }

// Errors of the store and the service.
var (
	ErrNotFound = errors.New("approval not found")
	// ErrSettled: the record is no longer pending (decided or expired); a decision is
	// single use.
	ErrSettled = errors.New("approval already decided or expired")
)

// Digest binds a decision to one exact call: SHA-256 over the route, the session, the
// tool name, the effective input as canonical JSON and the policy generation, each
// length-prefixed so that no two different tuples share an encoding. A changed input is
// a different call (seed composition: a changed input invalidates a prior approval).
func Digest(route, session, tool string, input json.RawMessage, generation string) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(route), []byte(session), []byte(tool), CanonicalJSON(input), []byte(generation)} {
		var n [8]byte
		l := uint64(len(part))
		for i := 7; i >= 0; i-- {
			n[i] = byte(l)
			l >>= 8
		}
		h.Write(n[:])
		h.Write(part)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// CanonicalJSON is v with object members sorted by key and no insignificant whitespace
// (numbers keep their literal spelling). Input that is not JSON is returned as it is:
// it is hashed as the raw text the call carried.
func CanonicalJSON(v json.RawMessage) []byte {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil || dec.More() {
		return v
	}
	var b bytes.Buffer
	writeCanonical(&b, x)
	return b.Bytes()
}

func writeCanonical(b *bytes.Buffer, x any) {
	switch t := x.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeCanonical(b, t[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(t.String())
	default:
		enc, _ := json.Marshal(t)
		b.Write(enc)
	}
}

// newID is a random record id (apr_ and 26 base32 letters, 128 bits): unguessable, so
// knowing one id tells nothing about another.
func newID() string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	return "apr_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(r[:]))
}
