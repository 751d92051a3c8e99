package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/chain/registration"
	"github.com/hookproxy/hookproxy/config"
)

// runValidate is `hookproxy validate --config FILE`: load the configuration and its
// registration document and print every problem to stderr as "FILE: JSON.PATH: reason"
// (warnings prefixed "warning: "). Exit 0 when valid, 1 when not, 2 on a usage error.
func runValidate(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("validate", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "configuration file (default: $"+config.EnvConfig+")")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "hookproxy validate: unexpected arguments %q\n", flags.Args())
		return 2
	}
	path := config.PathFromEnv(*configPath)
	if path == "" {
		fmt.Fprintf(stderr, "hookproxy validate: --config FILE is required (or set %s)\n", config.EnvConfig)
		return 2
	}

	cfg, err := config.Load(path)
	if err != nil {
		var cerr *config.Error
		if errors.As(err, &cerr) {
			for _, p := range cerr.Problems {
				fmt.Fprintf(stderr, "%s: %s: %s\n", path, p.Path, p.Message)
			}
		} else {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
		}
		return 1
	}

	valid := true
	regFile := app.RegistrationSource(cfg)
	doc, problems, err := app.LoadRegistration(cfg)
	for _, p := range problems {
		prefix := ""
		if p.Warning {
			prefix = "warning: "
		}
		fmt.Fprintf(stderr, "%s%s: %s: %s\n", prefix, regFile, p.Path, p.Message)
	}
	if err != nil {
		var rerr *registration.Error
		if !errors.As(err, &rerr) {
			// The file could not be read: report it against the config key naming it.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			fmt.Fprintf(stderr, "%s: registration: cannot read %s: %v\n", path, regFile, err)
		}
		valid = false
	}
	// The shadow registration gets the same checks as the live one.
	shadowDoc, problems, err := app.LoadShadowRegistration(cfg)
	for _, p := range problems {
		prefix := ""
		if p.Warning {
			prefix = "warning: "
		}
		fmt.Fprintf(stderr, "%s%s: %s: %s\n", prefix, cfg.Shadow.Registration, p.Path, p.Message)
	}
	if err != nil {
		var rerr *registration.Error
		if !errors.As(err, &rerr) {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			fmt.Fprintf(stderr, "%s: shadow.registration: cannot read %s: %v\n", path, cfg.Shadow.Registration, err)
		}
		valid = false
	}
	if !valid {
		return 1
	}
	// The summary names the policies in force, so that a configuration which lost them
	// (or never had them) shows it here rather than in an upstream's logs.
	summary := fmt.Sprintf("%s: valid: %d route(s)", path, len(cfg.Routes))
	names := app.PolicyNames(doc)
	if len(names) > 0 {
		summary += fmt.Sprintf("; policies in force: %s (registration: %s)", strings.Join(names, ", "), regFile)
	} else {
		summary += "; no policies in force (registration: " + regFile + ")"
		fmt.Fprintf(stderr, "warning: %s: %s\n", path, app.NoPoliciesWarning)
	}
	if shadowDoc != nil {
		summary += fmt.Sprintf("; shadow (enforcing nothing): %s", strings.Join(app.PolicyNames(shadowDoc), ", "))
	}
	fmt.Fprintln(stdout, summary)
	return 0
}
