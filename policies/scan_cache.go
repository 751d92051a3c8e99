package policies

import (
	"crypto/sha256"
	"encoding/json"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
	"github.com/hookproxy/hookproxy/internal/listmemo"
)

// Content-addressed scan results. A coding agent re-sends its whole conversation with every
// request: the system prompt and tool definitions of every session of one agent, and all of
// a session's history but its newest turn, were scanned on an earlier request. Each built-in
// scanner (secrets, pii, injection) keeps what it found in a text by the text's SHA-256 (the
// request's digest memo, transport.TextDigests, which the proxy's settlement fingerprints
// share, so a text is hashed once per request) and reuses it instead of scanning again.
//
// Results stay those of a fresh scan:
//   - a scan is a function of the text and the scanner's configuration, and a cache belongs
//     to one scanner, built from one configuration: a reload builds new policies and so
//     starts a new generation, and the old one is dropped with its policies;
//   - SHA-256 resists crafted collisions (a truncated or non-cryptographic hash would let a
//     prompt borrow a clean text's result);
//   - a reused result charges the request's work budget (work.go) what the scan charged, so
//     limits.maxPolicyScanBytes refuses the same requests; a scan the meter stopped is not
//     kept.
//
// Memory is bounded: a cache holds at most scanCacheBytes of accounted entries in two
// generations (the newer takes every insert and every hit; when it is full the older is
// dropped), so what is in use survives and what is not ages out. ScanCacheStats reports the
// bytes held by every live cache.

const (
	// scanCacheBytes bounds one scanner's cache. An entry of a clean text is ~120 bytes:
	// 8 MiB holds ~70,000 texts, the history of hundreds of long sessions.
	scanCacheBytes = 8 << 20
	// minCachedText is the shortest text whose result is cached: below it the scan costs
	// about what the lookup does (a digest and two map reads, ~150 ns).
	minCachedText = 64
	// entryOverhead is what an entry costs besides its findings: key, value and the map's
	// own share.
	entryOverhead = 96
	findingSize   = int(unsafe.Sizeof(Finding{}))
)

// scanKey is a cached result's key: the content's SHA-256 and what kind of scan it was
// (scanKindText: scanText of a text; scanKindParams: scanParams of a params object;
// scanKindJoined: scanText of texts joined, keyed by the texts' digests, joinedKey).
type scanKey struct {
	sum  [sha256.Size]byte
	kind uint8
}

const (
	scanKindText uint8 = iota + 1
	scanKindParams
	scanKindJoined
)

// scanEntry is a kept result; never modified once stored.
type scanEntry struct {
	findings []Finding  // scanKindText
	params   paramsScan // scanKindParams
	units    int64      // what the scan charged the work meter
	size     int64
}

// scanCache is one scanner's cache; safe for concurrent use.
type scanCache struct {
	mu        sync.Mutex
	cur, prev map[scanKey]*scanEntry
	curBytes  int64
	prevBytes int64
	limit     int64
	held      *atomic.Int64 // this cache's accounted bytes, released when it is collected
	entries   *atomic.Int64 // and its entries
	// note names this cache's notes on texts kept across requests (internal/heldtexts):
	// a key, not a pointer, so that a note does not keep a reloaded-away cache alive.
	note heldtexts.NoteKey
	// lists remembers the scan of each conversation's latest list (scan_lists.go).
	lists *listmemo.Memo[*listResult]
}

var scanCacheStats struct {
	bytes, entries atomic.Int64
	hits, misses   atomic.Uint64
}

// ScanCacheStats reports the built-in scanners' result caches: the bytes and entries held
// by every live cache, and scans answered from a cache (hits: a text's, or a message's
// reused with the leading messages of a list, scan_lists.go) or made (misses).
func ScanCacheStats() (bytes, entries int64, hits, misses uint64) {
	return scanCacheStats.bytes.Load(), scanCacheStats.entries.Load(),
		scanCacheStats.hits.Load(), scanCacheStats.misses.Load()
}

// newScanCache returns an empty cache of limit bytes. Its share of ScanCacheStats is
// released when the scanner that owns it is garbage.
func newScanCache(limit int64) *scanCache {
	c := &scanCache{limit: limit, held: new(atomic.Int64), entries: new(atomic.Int64),
		cur: map[scanKey]*scanEntry{}, note: heldtexts.NewNoteKey(), lists: listmemo.New[*listResult](scanListBytes)}
	type counts struct {
		bytes, entries *atomic.Int64
		note           heldtexts.NoteKey
	}
	runtime.AddCleanup(c, func(k counts) {
		scanCacheStats.bytes.Add(-k.bytes.Load())
		scanCacheStats.entries.Add(-k.entries.Load())
		k.note.Release()
	}, counts{c.held, c.entries, c.note})
	return c
}

func (c *scanCache) get(k scanKey) *scanEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.cur[k]; e != nil {
		return e
	}
	if e := c.prev[k]; e != nil {
		// In use again: move it to the newer generation.
		delete(c.prev, k)
		c.prevBytes -= e.size
		c.cur[k] = e
		c.curBytes += e.size
		c.rotate()
		return e
	}
	return nil
}

func (c *scanCache) put(k scanKey, e *scanEntry) {
	e.size = entryOverhead + int64(len(e.findings)*findingSize)
	for _, s := range e.params.kinds {
		e.size += int64(len(s)) + 16
	}
	for _, r := range e.params.reds {
		e.size += int64(len(r.Find)+len(r.Replace)) + 32
	}
	if e.size > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.cur[k]; old != nil {
		return
	}
	c.cur[k] = e
	c.curBytes += e.size
	c.entries.Add(1)
	scanCacheStats.entries.Add(1)
	c.account(e.size)
	c.rotate()
}

// rotate drops the older generation once the newer holds half the limit.
func (c *scanCache) rotate() {
	if c.curBytes < c.limit/2 {
		return
	}
	c.account(-c.prevBytes)
	c.entries.Add(-int64(len(c.prev)))
	scanCacheStats.entries.Add(-int64(len(c.prev)))
	c.prev, c.prevBytes = c.cur, c.curBytes
	c.cur, c.curBytes = make(map[scanKey]*scanEntry, len(c.prev)), 0
}

func (c *scanCache) account(n int64) {
	c.held.Add(n)
	scanCacheStats.bytes.Add(n)
}

// joinedKey is the key of the scan of texts joined: the SHA-256 of the texts' digests one
// after the other. The digests have one length, so the list of texts is recoverable from
// it (short of a SHA-256 collision): two keys are equal only for the same texts, and so
// the same join. The same join of other parts gets another key (scanned once more, never
// a wrong result).
func joinedKey(td *transport.TextDigests, texts []string) scanKey {
	var buf [8 * sha256.Size]byte
	b := buf[:0]
	for _, t := range texts {
		d := td.Sum(t)
		b = append(b, d[:]...)
	}
	return scanKey{sum: sha256.Sum256(b), kind: scanKindJoined}
}

// scanParams is scanParams(params, d) through the cache: the request's params (the tool
// definitions above all) are the same on every request of a session. The result is shared
// and must not be modified.
func (d *metered) scanParams(params json.RawMessage) paramsScan {
	if d.cache == nil || len(params) < minCachedText {
		return scanParams(params, d)
	}
	if d.meter.stopped() != nil {
		return paramsScan{}
	}
	k := scanKey{sum: transport.SumBytes(params), kind: scanKindParams}
	if e := d.cache.get(k); e != nil {
		d.hits++
		d.meter.charge(int(e.units)) // the caller checks the meter
		return e.params
	}
	d.misses++
	before := d.meter.charged
	ps := scanParams(params, d)
	if d.meter.stopped() == nil {
		d.cache.put(k, &scanEntry{params: ps, units: d.meter.charged - before})
	}
	return ps
}
