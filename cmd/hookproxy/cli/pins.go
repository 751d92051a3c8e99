package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookproxy/hookproxy/admin"
)

const pinsUsage = `usage: hookproxy pins [--config FILE] [--admin ADDR] [--scope SCOPE] [--token-env NAME | --token-file PATH] COMMAND
  list           every pinned tool and every definition waiting for review
  export         the pins as a pins file (pinning.mode file), to stdout or --out FILE
  accept TOOL    make the definition of TOOL last seen its pin
  forget TOOL    remove the pin of TOOL (tofu pins the next definition seen)
` + adminUsage

// runPins is `hookproxy pins ...`, a client of the admin listener's /pins endpoints.
// Exit 0 success, 1 failure (the listener refused or is unreachable), 2 usage error.
func runPins(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("pins", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() { fmt.Fprint(stderr, pinsUsage) }
	target := registerAdminFlags(flags)
	scope := flags.String("scope", "", "the scope of TOOL, when several hold it")
	out := flags.String("out", "", "export: write the pins file here instead of stdout")
	// Flags may stand before or after the command and its argument.
	rest, code, ok := parseInterspersed(flags, args)
	if !ok {
		return code
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
	c, err := target.client(10 * time.Second)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy pins: %v\n", err)
		return 1
	}
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
