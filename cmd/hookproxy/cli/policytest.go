package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/replay"
)

// runTest is `hookproxy test [--config FILE] CASES.yaml...`: run every case of every file
// against a configuration (--config, else the file's own `config:` key, else
// $HOOKPROXY_CONFIG) and print one line per case. Exit 0 when every case passes, 1 when
// one fails, 2 on an error (usage, an unreadable file, an invalid case or configuration).
func runTest(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("test", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "configuration to test (default: the case file's config key, else $"+config.EnvConfig+")")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "hookproxy test: "+format+"\n", a...)
		return 2
	}
	if flags.NArg() == 0 {
		return fail("name at least one case file")
	}
	passed, failed := 0, 0
	for _, file := range flags.Args() {
		suite, err := replay.LoadSuite(file)
		if err != nil {
			return fail("%v", err)
		}
		path := *configPath
		if path == "" && suite.Config != "" {
			path = suite.Config
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(file), path)
			}
		}
		path = config.PathFromEnv(path)
		if path == "" {
			return fail("%s: no configuration (--config, the file's config key, or %s)", file, config.EnvConfig)
		}
		cfg, err := config.Load(path)
		if err != nil {
			return fail("%v", err)
		}
		ch, err := app.BuildChain(cfg, cfg.Source, zap.NewNop())
		if err != nil {
			return fail("%s: %v", app.RegistrationSource(cfg), err)
		}
		for i := range suite.Cases {
			c := &suite.Cases[i]
			res, err := replay.RunCase(context.Background(), cfg, ch, c)
			if err != nil {
				if ch != nil {
					_ = ch.Close()
				}
				return fail("%s: %v", file, err)
			}
			if res.Pass {
				passed++
				fmt.Fprintf(stdout, "PASS  %s: %s\n", file, c.Name)
			} else {
				failed++
				fmt.Fprintf(stdout, "FAIL  %s: %s: expected %s, got %s\n", file, c.Name, c.Expect, res.Got)
			}
		}
		if ch != nil {
			_ = ch.Close()
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
