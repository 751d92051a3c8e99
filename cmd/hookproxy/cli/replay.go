package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/replay"
)

// runReplay is `hookproxy replay --capture DIR|FILE --config CANDIDATE [--format
// table|json] [--boundary B] [--since T]`: re-settle every captured event through the
// candidate configuration's chain and report each event whose outcome would differ from
// the recorded live one. Exit 0 when nothing differs, 1 when something does, 2 on an
// error (usage, an unreadable capture, an invalid configuration), so that a CI job can
// gate a policy change on captured traffic.
func runReplay(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("replay", flag.ContinueOnError)
	flags.SetOutput(stderr)
	capturePath := flags.String("capture", "", "capture directory or file (capture.dir of the configuration that recorded it)")
	configPath := flags.String("config", "", "the candidate configuration (default: $"+config.EnvConfig+")")
	format := flags.String("format", "table", "report format: table or json")
	boundary := flags.String("boundary", "", "replay only this boundary (an event type such as tool.before)")
	since := flags.String("since", "", "replay only boundaries captured since T: an RFC 3339 time or a duration such as 24h")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "hookproxy replay: "+format+"\n", a...)
		return 2
	}
	if flags.NArg() > 0 {
		return fail("unexpected arguments %q", flags.Args())
	}
	if *capturePath == "" {
		return fail("--capture DIR|FILE is required")
	}
	if *format != "table" && *format != "json" {
		return fail("--format %q is not table or json", *format)
	}
	if *boundary != "" && !ahp.IsEventType(*boundary) {
		return fail("--boundary %q is not an AHP event type", *boundary)
	}
	opts := replay.Options{Capture: *capturePath, Boundary: *boundary}
	if *since != "" {
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return fail("--since: %v", err)
		}
		opts.Since = t
	}
	path := config.PathFromEnv(*configPath)
	if path == "" {
		return fail("--config FILE is required (or set %s)", config.EnvConfig)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return fail("%v", err)
	}
	ch, err := app.BuildChain(cfg, cfg.Source, zap.NewNop())
	if err != nil {
		return fail("%s: %v", app.RegistrationSource(cfg), err)
	}
	if ch != nil {
		defer ch.Close()
	}
	opts.Chain = ch
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := replay.Run(ctx, opts)
	if err != nil {
		return fail("%v", err)
	}
	if *format == "json" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return fail("%v", err)
	}
	if len(rep.Differences) > 0 {
		return 1
	}
	return 0
}

// parseSince reads an RFC 3339 time, or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a duration (24h)", s)
	}
	return now.Add(-d), nil
}
