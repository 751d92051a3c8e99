package policies

import (
	"slices"
	"unsafe"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// The scan of a conversation's list, remembered for its next request. A coding agent's
// request N+1 carries request N's messages and its newest turn; the scan of a message is a
// function of that message alone (its texts, their kinds, selection and gaps, and the
// filter, which looks at nothing but the message and the part), so the scan of N+1 is the
// scan of N over the messages both share, then the scan of the rest. Without this, each
// request looked every text of the history up in the per-text result cache
// (scan_cache.go): hundreds of lookups of cold memory per request, a cost that grew with
// the history.
//
// Exact: the shared messages are compared field by field with the remembered list
// (internal/listmemo, which keeps the read-only list it was given; no hash is trusted),
// and the filter is part of the key. A reused run charges the work meter what its scan
// charged, so limits.maxPolicyScanBytes refuses the same requests; a scan the meter
// stopped is not remembered. The memo belongs to the scanner's result cache: a
// configuration reload starts a new one.

// scanListBytes bounds one scanner's memo of lists. A 160-turn coding session is about
// 0.5 MiB of messages, parts and texts (mostly memory the request decode memo holds
// anyway); 32 MiB keeps the latest list of some sixty such sessions, and many more short
// ones.
const scanListBytes = 32 << 20

// listMark is the scan's state after a message: how many hits and split kinds it had
// found, whether a text was withheld so far, and what it had charged the meter.
type listMark struct {
	hits, split int32
	withheld    bool
	units       int64
}

// listMarks is the scan's state before the first message, then after each.
type listMarks struct {
	l    []listMark
	base int64 // the meter's charge when the scan of the list began
	m    *meter
}

func (a *listMarks) add(ls *listScan) {
	a.l = append(a.l, listMark{hits: int32(len(ls.hits)), split: int32(len(ls.split)), withheld: ls.withheld,
		units: a.m.charged - a.base})
}

// listResult is a remembered list's scan, never written once kept.
type listResult struct {
	ls    listScan
	marks []listMark // len(items)+1
}

// minListKept is the shortest list the memo keeps: a short list (a tool result at
// tool.after, a first prompt) is seldom sent again as the start of a longer one, and its
// texts are found in the per-text cache anyway; keeping it would only push conversations'
// lists out of the memo.
const minListKept = 4

// scanList is scanItems through the scanner's memo of lists.
func (d *metered) scanList(items []ahp.Message, include partFilter) listScan {
	if d.meter.stopped() != nil {
		return listScan{}
	}
	if len(items) < minListKept {
		return scanMessages(items, 0, listScan{}, d, include, nil)
	}
	lists := d.cache.lists
	key, e, shared := lists.Find(uint64(include), items)
	at := listMarks{l: make([]listMark, 0, len(items)+1), base: d.meter.charged, m: &d.meter}
	var ls listScan
	if e != nil {
		r := e.Value
		k := r.marks[shared]
		if !d.meter.charge(int(k.units)) {
			return ls // the caller checks the meter
		}
		d.hits += uint64(shared) // each message's scan, reused
		ls = listScan{hits: slices.Clone(r.ls.hits[:k.hits]), split: slices.Clone(r.ls.split[:k.split]), withheld: k.withheld}
		at.l = append(at.l, r.marks[:shared+1]...)
	} else {
		at.add(&ls)
	}
	ls = scanMessages(items, shared, ls, d, include, &at)
	if d.meter.stopped() != nil {
		return ls
	}
	kept := &listResult{ls: listScan{hits: slices.Clone(ls.hits), split: slices.Clone(ls.split), withheld: ls.withheld}, marks: at.l}
	extra := int64(cap(at.l))*int64(unsafe.Sizeof(listMark{})) + int64(len(ls.hits))*int64(unsafe.Sizeof(partHit{})) + 64
	for _, h := range ls.hits {
		extra += int64(len(h.findings) * findingSize)
	}
	lists.Keep(key, items, shared, kept, extra, e)
	return ls
}
