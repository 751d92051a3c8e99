package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/config"
)

const pinsUsage = `usage: hookproxy pins [--config FILE] [--admin ADDR] [--scope SCOPE] COMMAND
  list           every pinned tool and every definition waiting for review
  export         the pins as a pins file (pinning.mode file), to stdout or --out FILE
  accept TOOL    make the definition of TOOL last seen its pin
  forget TOOL    remove the pin of TOOL (tofu pins the next definition seen)
The admin listener is --admin, else FILE's admin address, else 127.0.0.1:9090; its token is
FILE's admin token, else $` + EnvAdminToken + `.
`

// runPins is `hookproxy pins ...`, a client of the admin listener's /pins endpoints.
// Exit 0 success, 1 failure (the listener refused or is unreachable), 2 usage error.
func runPins(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("pins", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprint(stderr, pinsUsage) }
	configPath := flags.String("config", "", "configuration file (default: $"+config.EnvConfig+")")
	adminAddr := flags.String("admin", "", "admin listener address (host:port or URL)")
	scope := flags.String("scope", "", "the scope of TOOL, when several hold it")
	out := flags.String("out", "", "export: write the pins file here instead of stdout")
	// Flags may stand before or after the command and its argument.
	var rest []string
	for {
		if err := flags.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if flags.NArg() == 0 {
			break
		}
		rest = append(rest, flags.Arg(0))
		args = flags.Args()[1:]
	}
	if len(rest) == 0 {
		fmt.Fprint(stderr, pinsUsage)
		return 2
	}
	cmd, rest := rest[0], rest[1:]
	want := map[string]int{"list": 0, "export": 0, "accept": 1, "forget": 1}
	n, known := want[cmd]
	if !known || len(rest) != n {
		fmt.Fprintf(stderr, "hookproxy pins: %q needs %d argument(s)\n%s", cmd, n, pinsUsage)
		return 2
	}
	base, token, err := pinsTarget(*configPath, *adminAddr)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy pins: %v\n", err)
		return 1
	}
	c := &pinsClient{base: base, token: token, http: &http.Client{Timeout: 10 * time.Second}}
	switch cmd {
	case "list":
		var l admin.PinsList
		if err := c.do(http.MethodGet, "/pins", nil, &l); err != nil {
			fmt.Fprintf(stderr, "hookproxy pins list: %v\n", err)
			return 1
		}
		printPins(stdout, l)
	case "export":
		var raw json.RawMessage
		if err := c.do(http.MethodGet, "/pins/export", nil, &raw); err != nil {
			fmt.Fprintf(stderr, "hookproxy pins export: %v\n", err)
			return 1
		}
		b := append(bytes.TrimSpace(raw), '\n')
		if *out == "" {
			_, _ = stdout.Write(b)
			return 0
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			fmt.Fprintf(stderr, "hookproxy pins export: %v\n", err)
			return 1
		}
	case "accept", "forget":
		var res admin.PinChange
		if err := c.do(http.MethodPost, "/pins/"+cmd, admin.PinChange{Tool: rest[0], Scope: *scope}, &res); err != nil {
			fmt.Fprintf(stderr, "hookproxy pins %s: %v\n", cmd, err)
			return 1
		}
		verb := map[string]string{"accept": "accepted", "forget": "forgot"}[cmd]
		fmt.Fprintf(stdout, "%s %s in %s\n", verb, res.Tool, res.Scope)
	}
	return 0
}

// pinsTarget finds the admin listener's base URL and token.
func pinsTarget(configPath, adminAddr string) (string, string, error) {
	addr, token := adminAddr, ""
	if path := config.PathFromEnv(configPath); path != "" {
		cfg, err := config.Load(path)
		if err != nil {
			return "", "", err
		}
		if addr == "" {
			addr = cfg.Admin
		}
		if toks := cfg.AdminAuth.NamedTokens(); len(toks) > 0 {
			if token, err = toks[0].Secret(); err != nil {
				return "", "", fmt.Errorf("the admin token: %w", err)
			}
		}
	}
	if token == "" {
		token = os.Getenv(EnvAdminToken)
	}
	if addr == "" {
		addr = "127.0.0.1:9090"
	}
	if !strings.Contains(addr, "://") {
		if strings.HasPrefix(addr, ":") {
			addr = "127.0.0.1" + addr
		}
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/"), token, nil
}

type pinsClient struct {
	base, token string
	http        *http.Client
}

func (c *pinsClient) do(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
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
		return fmt.Errorf("the admin listener at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error  string   `json:"error"`
			Scopes []string `json:"scopes"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, msg)
	}
	return json.Unmarshal(raw, out)
}

// printPins writes one line per tool: scope, name, state, digest (short).
func printPins(w io.Writer, l admin.PinsList) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SCOPE\tTOOL\tSTATE\tDIGEST\n")
	for _, s := range l.Scopes {
		for _, e := range s.Tools {
			state, digest := "pinned", e.Digest
			if len(e.Poison) > 0 {
				state = "pinned, poisoned: " + strings.Join(e.Poison, ",")
			}
			if p := e.Pending; p != nil {
				state = "pending: " + p.Kind
				if p.Like != "" {
					state += " (like " + p.Like + ")"
				}
				if len(p.Poison) > 0 {
					state += ", poisoned: " + strings.Join(p.Poison, ",")
				}
				if p.Digest != "" {
					digest = p.Digest
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Scope, e.Name, state, shortDigest(digest))
		}
	}
	_ = tw.Flush()
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}
