package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/config"
)

// Environment of `hookproxy approvals`.
const (
	EnvAdmin      = "HOOKPROXY_ADMIN"       // the admin listener's address or URL
	EnvAdminToken = "HOOKPROXY_ADMIN_TOKEN" // its bearer token (admin.token)
)

const approvalsUsage = `usage: hookproxy approvals list [--state pending|decided|all]
       hookproxy approvals show ID
       hookproxy approvals approve ID [--reason TEXT]
       hookproxy approvals deny ID [--reason TEXT]
flags (anywhere): --admin ADDR (default $` + EnvAdmin + `, else the configuration's admin, else 127.0.0.1:9090)
                  --config FILE, --token-env NAME (default ` + EnvAdminToken + `), --token-file PATH
`

// runApprovals is `hookproxy approvals ...`: the admin listener's approvals endpoints from
// the command line. Exit 0 done, 1 refused or failed (unknown id, already decided,
// unreachable), 2 usage.
func runApprovals(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("approvals", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprint(stderr, approvalsUsage) }
	adminAddr := flags.String("admin", "", "admin listener address host:port or URL")
	configPath := flags.String("config", "", "configuration file naming the admin address")
	tokenEnv := flags.String("token-env", EnvAdminToken, "environment variable holding the admin token")
	tokenFile := flags.String("token-file", "", "file holding the admin token")
	state := flags.String("state", "pending", "list: pending, decided or all")
	reason := flags.String("reason", "", "approve/deny: the reason recorded with the decision")
	// Flags may follow the positional arguments (approve ID --reason TEXT).
	var pos []string
	rest := args
	for {
		if err := flags.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if flags.NArg() == 0 {
			break
		}
		pos = append(pos, flags.Arg(0))
		rest = flags.Args()[1:]
	}
	if len(pos) == 0 {
		fmt.Fprint(stderr, approvalsUsage)
		return 2
	}
	base, err := adminBase(*adminAddr, *configPath)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy approvals: %v\n", err)
		return 2
	}
	token := ""
	switch {
	case *tokenFile != "":
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "hookproxy approvals: --token-file: %v\n", err)
			return 2
		}
		token = strings.TrimSpace(string(b))
	case *tokenEnv != "":
		token = os.Getenv(*tokenEnv)
	}
	c := &adminClient{base: base, token: token, http: &http.Client{Timeout: 30 * time.Second}}
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
		body, _ := json.Marshal(map[string]string{"decision": decision, "reason": *reason})
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

// adminBase is the admin listener's base URL: --admin, $HOOKPROXY_ADMIN, the
// configuration's admin address, or the default 127.0.0.1:9090.
func adminBase(flagValue, configPath string) (string, error) {
	addr := flagValue
	if addr == "" {
		addr = os.Getenv(EnvAdmin)
	}
	if addr == "" {
		if p := config.PathFromEnv(configPath); p != "" {
			cfg, err := config.Load(p)
			if err != nil {
				return "", err
			}
			addr = cfg.Admin
		}
	}
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("--admin %q is not host:port or a URL", flagValue)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

type adminClient struct {
	base, token string
	http        *http.Client
}

// do sends one request and decodes a 200 answer into out; any other status is an error
// carrying the server's message.
func (c *adminClient) do(method, path string, body []byte, out any) error {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, msg)
	}
	return json.Unmarshal(b, out)
}

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
