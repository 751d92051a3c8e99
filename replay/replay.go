package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookproxy/hookproxy/capture"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/policies"
)

// Options select what is replayed.
type Options struct {
	// Capture is a capture file or directory.
	Capture string
	// Chain is the candidate's chain (nil: a plain proxy, which settles nothing).
	Chain *chain.Chain
	// Boundary keeps only events of this type ("" for all).
	Boundary string
	// Since keeps only boundaries captured at or after it (zero for all).
	Since time.Time
}

// Row is one event whose candidate settlement differs from the recorded one.
type Row struct {
	Time      time.Time          `json:"time"`
	Session   string             `json:"session"`
	Boundary  string             `json:"boundary"`
	Subject   string             `json:"subject"`
	EventID   string             `json:"eventId"`
	Recorded  enforcement.Action `json:"recorded"`
	Candidate enforcement.Action `json:"candidate"`
	Diff      string             `json:"diff"`
}

// Report is the result of a replay.
type Report struct {
	Events      int   `json:"events"`
	Differences []Row `json:"differences"`
	// Totals count the events by outcome, as recorded and as the candidate settles them.
	Totals struct {
		Recorded  map[enforcement.Action]int `json:"recorded"`
		Candidate map[enforcement.Action]int `json:"candidate"`
	} `json:"totals"`
}

// Run replays the capture through the candidate chain.
func Run(ctx context.Context, o Options) (*Report, error) {
	r := &Report{Differences: []Row{}}
	r.Totals.Recorded = map[enforcement.Action]int{}
	r.Totals.Candidate = map[enforcement.Action]int{}
	err := capture.Read(o.Capture, func(l *capture.Line) error {
		if o.Boundary != "" && l.Boundary != o.Boundary {
			return nil
		}
		if !o.Since.IsZero() && l.Time.Before(o.Since) {
			return nil
		}
		cand, err := Settle(ctx, o.Chain, l)
		if err != nil {
			return err
		}
		r.Events++
		r.Totals.Recorded[l.Live.Outcome]++
		r.Totals.Candidate[cand.Outcome]++
		if differs, diff := capture.Compare(l.Boundary, l.Live, cand); differs {
			r.Differences = append(r.Differences, Row{Time: l.Time, Session: l.Session, Boundary: l.Boundary,
				Subject: l.Subject, EventID: l.EventID, Recorded: l.Live.Outcome, Candidate: cand.Outcome, Diff: diff})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, ctx.Err()
}

// Settle re-settles one captured event through ch with its recorded ids and offer.
func Settle(ctx context.Context, ch *chain.Chain, l *capture.Line) (capture.Decision, error) {
	var ev ahp.Event
	if err := json.Unmarshal(l.Event, &ev); err != nil {
		return capture.Decision{}, fmt.Errorf("event %s: %w", l.EventID, err)
	}
	if ch == nil {
		return capture.Summarize(nil), nil
	}
	evp := &ev
	if l.Redacted {
		// The capture took the credentials out; made-up ones of the same kinds go back
		// in, so a redacting policy settles the event as it settled the original.
		evp = policies.StandInCopy(evp)
	}
	var caps ahp.Capabilities
	if len(l.Capabilities) > 0 {
		if err := json.Unmarshal(l.Capabilities, &caps); err != nil {
			return capture.Decision{}, fmt.Errorf("event %s: capabilities: %w", l.EventID, err)
		}
	}
	st := ch.Intercept(ctx, evp, caps, l.Extensions...)
	st.Wait()
	return capture.Summarize(st), nil
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the differences as a table, then the totals.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Differences) > 0 {
		fmt.Fprintln(tw, "SESSION\tBOUNDARY\tTOOL/REQUEST\tRECORDED → CANDIDATE\tDIFF")
		for _, d := range r.Differences {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s → %s\t%s\n", orDash(d.Session), d.Boundary, orDash(d.Subject), d.Recorded, d.Candidate, d.Diff)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d events replayed, %d differ\nrecorded:  %s\ncandidate: %s\n",
		r.Events, len(r.Differences), totals(r.Totals.Recorded), totals(r.Totals.Candidate))
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func totals(m map[enforcement.Action]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[enforcement.Action(k)])
	}
	return strings.Join(parts, ", ")
}
