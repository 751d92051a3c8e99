package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/hookproxy/hookproxy/approvals"
)

const approvalsUsage = `usage: hookproxy approvals list [--state pending|decided|all]
       hookproxy approvals show ID
       hookproxy approvals approve ID [--reason TEXT]
       hookproxy approvals deny ID [--reason TEXT]
flags may stand anywhere;
` + adminUsage

// runApprovals is `hookproxy approvals ...`: the admin listener's approvals endpoints from
// the command line. Exit 0 done, 1 refused or failed (unknown id, already decided,
// unreachable), 2 usage.
func runApprovals(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("approvals", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprint(stderr, approvalsUsage) }
	target := registerAdminFlags(flags)
	state := flags.String("state", "pending", "list: pending, decided or all")
	reason := flags.String("reason", "", "approve/deny: the reason recorded with the decision")
	pos, code, ok := parseInterspersed(flags, args)
	if !ok {
		return code
	}
	if len(pos) == 0 {
		fmt.Fprint(stderr, approvalsUsage)
		return 2
	}
	c, err := target.client(30 * time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy approvals: %v\n", err)
		return 2
	}
	need := func(n int) bool {
		if len(pos) != n {
			fmt.Fprint(stderr, approvalsUsage)
			return false
		}
		return true
	}
	switch pos[0] {
	case "list":
		if !need(1) {
			return 2
		}
		var recs []approvals.Record
		if err := c.do(http.MethodGet, "/approvals?state="+url.QueryEscape(*state), nil, &recs); err != nil {
			fmt.Fprintf(stderr, "hookproxy approvals list: %v\n", err)
			return 1
		}
		printRecords(stdout, recs)
	case "show":
		if !need(2) {
			return 2
		}
		var rec json.RawMessage
		if err := c.do(http.MethodGet, "/approvals/"+url.PathEscape(pos[1]), nil, &rec); err != nil {
			fmt.Fprintf(stderr, "hookproxy approvals show: %v\n", err)
			return 1
		}
		var out bytes.Buffer
		_ = json.Indent(&out, rec, "", "  ")
		fmt.Fprintln(stdout, out.String())
	case "approve", "deny":
		if !need(2) {
			return 2
		}
		decision := approvals.DecisionApprove
		if pos[0] == "deny" {
			decision = approvals.DecisionDeny
		}
		body := map[string]string{"decision": decision, "reason": *reason}
		var rec approvals.Record
		if err := c.do(http.MethodPost, "/approvals/"+url.PathEscape(pos[1]), body, &rec); err != nil {
			fmt.Fprintf(stderr, "hookproxy approvals %s: %v\n", pos[0], err)
			return 1
		}
		fmt.Fprintf(stdout, "%s %s (%s by %s)\n", rec.State, rec.ID, rec.Tool.Name, rec.DecidedBy)
	default:
		fmt.Fprintf(stderr, "hookproxy approvals: unknown subcommand %q\n%s", pos[0], approvalsUsage)
		return 2
	}
	return 0
}

// printRecords writes one line per record, its input compacted and cut at 60 bytes.
func printRecords(w io.Writer, recs []approvals.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tTOOL\tROUTE\tCREATED\tEXPIRES\tINPUT")
	for _, r := range recs {
		var compact bytes.Buffer
		in := string(r.Tool.Input)
		if json.Compact(&compact, r.Tool.Input) == nil {
			in = compact.String() // one line per record: the server indents its answer
		}
		if len(in) > 60 {
			in = in[:57] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, r.Tool.Name, r.Route,
			r.CreatedAt.Format(time.RFC3339), r.ExpiresAt.Format(time.RFC3339), in)
	}
	_ = tw.Flush()
}
