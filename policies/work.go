package policies

// Bounded policy work. Each call of a scanning policy gets a meter: its scanners charge the
// bytes they examine (the anchor pass over each text, the window every detector match may
// read, each regular-expression pass weighted by what it costs) and, every meterStep units,
// check the call's context and the request's work budget (transport.WorkBudget, shared by
// every in-process policy the request reaches). A call past its deadline stops at the next
// check instead of scanning on after the chain gave up on it; a request whose policy work
// exceeds limits.maxPolicyScanBytes is refused.

import (
	"context"
	"errors"
	"strings"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/heldtexts"
)

const (
	// meterStep is how much work passes between two checks of the context and the budget:
	// 64 KiB of anchor pass is tens of microseconds, so a call stops soon after its
	// deadline, and the check costs nothing measurable per byte.
	meterStep = 64 << 10
	// regexWeight is what a byte handed to a regular expression costs in units of the
	// anchor pass: Go's regexp runs a backtracker or an NFA, tens of nanoseconds a byte,
	// where the anchor pass takes about one.
	regexWeight = 16
	// defaultMatchCost is charged for a matcher call whose anchor declares no cost: the
	// short windows of the pii and injection matchers.
	defaultMatchCost = 128
)

// WorkBudgetCode is the deny code of a request refused for exceeding its policy work
// budget.
const WorkBudgetCode = "hookproxy.limits.policy_work"

var errWorkBudget = errors.New("policies: the request's policy work budget (limits.maxPolicyScanBytes) is spent")

// meter counts one policy call's work. A nil meter counts nothing and never stops (the
// detectors' own tests and benchmarks).
type meter struct {
	ctx    context.Context
	budget *transport.WorkBudget // nil: the call counts against a budget of its own
	own    int64                 // what the call spent when budget is nil
	// charged is every unit the call charged, for the scan cache (scan_cache.go).
	charged int64
	err     error // why the call stopped: errWorkBudget or the context's error
}

// newMeter returns the detector of one call of s, metered against the budget ctx carries;
// without one (a policy served by `hookproxy backend`, a test) the call gets a budget of
// its own of the default size. The detector and its meter are one allocation.
func newMeter(ctx context.Context, s scanner) *metered {
	return &metered{s: s, cache: s.results(), td: transport.TextDigestsFrom(ctx),
		meter: meter{ctx: ctx, budget: transport.WorkBudgetFrom(ctx)}}
}

// charge counts n units; false once the call must stop.
func (m *meter) charge(n int) bool {
	if m == nil {
		return true
	}
	if m.err != nil {
		return false
	}
	m.charged += int64(n)
	if err := m.ctx.Err(); err != nil {
		m.err = err
		return false
	}
	if m.budget == nil {
		m.own += int64(n)
		if m.own > transport.DefaultWorkBudget {
			m.err = errWorkBudget
			return false
		}
		return true
	}
	if !m.budget.Spend(int64(n)) {
		m.err = errWorkBudget
		return false
	}
	return true
}

// stopped is why the call stopped, nil while it may go on.
func (m *meter) stopped() error {
	if m == nil {
		return nil
	}
	return m.err
}

// overBudget settles a call that stopped: a spent budget refuses the operation (deny, else
// flow stop) whatever the policy's action, since what was not scanned must not pass;
// a context that ended is returned as the call's error, which the chain reports as the
// timeout or cancellation it is.
func overBudget(m *meter, caps *ahp.Capabilities) (*ahp.InterceptResult, error) {
	err := m.stopped()
	if !errors.Is(err, errWorkBudget) {
		return nil, err
	}
	reason := "The request needs more policy work than hookproxy allows for one request (limits.maxPolicyScanBytes)."
	if e, ok := block(caps, reason, WorkBudgetCode); ok {
		return results(e), nil
	}
	return nil, err
}

// scanner is a detector whose scans can be metered.
type scanner interface {
	detector
	scanTextMetered(m *meter, dst []Finding, text string) []Finding
	scanFieldMetered(m *meter, dst []Finding, key, value string) []Finding
	// results is the scanner's result cache (scan_cache.go); nil keeps none.
	results() *scanCache
}

// metered is s as the detector of one call, charging its meter, with s's result cache
// and the request's digest memo.
type metered struct {
	s            scanner
	cache        *scanCache
	td           *transport.TextDigests
	hits, misses uint64 // cache lookups, reported by done
	meter
}

// scanText reuses the result of a scan of the same text by the same scanner (scan_cache.go),
// charging the meter what that scan charged, or scans and keeps the result.
func (d *metered) scanText(dst []Finding, text string) []Finding {
	if d.cache == nil || len(text) < minCachedText {
		return d.s.scanTextMetered(&d.meter, dst, text)
	}
	if d.meter.stopped() != nil {
		return dst
	}
	if t, ok := heldtexts.Find(text); ok {
		return d.scanHeld(dst, t, text)
	}
	k := scanKey{sum: d.td.SumUnheld(text), kind: scanKindText}
	if dst, ok := d.fromCache(dst, k); ok {
		return dst
	}
	dst, _ = d.scanAndKeep(dst, k, text)
	return dst
}

// scanHeld is scanText of a text the process keeps across requests (internal/heldtexts):
// the scanner's result for it is a note on the held text, found with the text, so a text
// re-sent unchanged costs neither a digest lookup nor a cache lookup. The note is the
// cache's own entry, under the cache's key (one scanner, one configuration); only clean
// results are noted, which are small.
func (d *metered) scanHeld(dst []Finding, t heldtexts.Text, text string) []Finding {
	if e, _ := t.Note(d.cache.note).(*scanEntry); e != nil {
		d.hits++
		return d.reuse(dst, e)
	}
	k := scanKey{sum: t.Sum(), kind: scanKindText}
	e := d.cache.get(k)
	if e != nil {
		d.hits++
		dst = d.reuse(dst, e)
	} else {
		d.misses++
		dst, e = d.scanAndKeep(dst, k, text)
	}
	if e != nil && len(e.findings) == 0 {
		t.SetNote(d.cache.note, e)
	}
	return dst
}

// scanJoined is scanText of the texts joined, looked up by the texts' digests: the join is
// only built when it has to be scanned.
func (d *metered) scanJoined(dst []Finding, texts []string) []Finding {
	n := 0
	for _, t := range texts {
		n += len(t)
	}
	if d.cache == nil || n < minCachedText {
		return d.s.scanTextMetered(&d.meter, dst, strings.Join(texts, ""))
	}
	if d.meter.stopped() != nil {
		return dst
	}
	k := joinedKey(d.td, texts)
	if dst, ok := d.fromCache(dst, k); ok {
		return dst
	}
	dst, _ = d.scanAndKeep(dst, k, strings.Join(texts, ""))
	return dst
}

// fromCache appends the findings kept under k, charging the meter what their scan charged
// (the caller checks the meter); false when none are kept.
func (d *metered) fromCache(dst []Finding, k scanKey) ([]Finding, bool) {
	e := d.cache.get(k)
	if e == nil {
		d.misses++
		return dst, false
	}
	d.hits++
	return d.reuse(dst, e), true
}

// reuse appends a kept result's findings, charging the meter what its scan charged.
func (d *metered) reuse(dst []Finding, e *scanEntry) []Finding {
	if !d.meter.charge(int(e.units)) {
		return dst
	}
	return append(dst, e.findings...)
}

// scanAndKeep scans text and keeps what it found under k, unless the meter stopped it;
// it returns the kept entry (nil if none).
func (d *metered) scanAndKeep(dst []Finding, k scanKey, text string) ([]Finding, *scanEntry) {
	start, before := len(dst), d.meter.charged
	dst = d.s.scanTextMetered(&d.meter, dst, text)
	if d.meter.stopped() != nil {
		return dst, nil
	}
	var fs []Finding
	if len(dst) > start {
		fs = append(fs, dst[start:]...)
	}
	e := &scanEntry{findings: fs, units: d.meter.charged - before}
	d.cache.put(k, e)
	return dst, e
}

// done reports the call's cache lookups to ScanCacheStats: once per call rather than per
// text, so that concurrent requests do not contend on the counters for every text.
func (d *metered) done() {
	if d.hits > 0 {
		scanCacheStats.hits.Add(d.hits)
	}
	if d.misses > 0 {
		scanCacheStats.misses.Add(d.misses)
	}
	d.hits, d.misses = 0, 0
}

func (d *metered) scanField(dst []Finding, key, value string) []Finding {
	return d.s.scanFieldMetered(&d.meter, dst, key, value)
}
