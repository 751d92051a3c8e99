package cli

import (
	"fmt"
	"io"
)

const usage = `usage: hookproxy <command> [flags]

commands:
  serve    [--config FILE] [--listen ADDR] [--admin ADDR] [--log-format auto|json|console]
                             run the proxy (default config: $HOOKPROXY_CONFIG, else the embedded default)
  validate --config FILE     check a configuration and its registration document
  backend  [--config FILE] [--listen ADDR | --stdio]
                             serve the built-in policies of FILE's registration as one AHP backend
  replay   --capture DIR|FILE --config FILE [--format table|json] [--boundary B] [--since T]
                             re-settle captured traffic through FILE's chain and report what would
                             change (exit 0 nothing differs, 1 something does, 2 error)
  test     [--config FILE] CASES.yaml...
                             run policy test cases against a configuration (exit 0 all pass, 1 a
                             case fails, 2 error)
  demo     [--listen ADDR]   offline demo: the proxy, the built-in policies and an imitation model API
                             (default 127.0.0.1:8088, else a free port; never serve's 8080)
  fake-model [--listen ADDR] run only the imitation of the OpenAI, Anthropic and Gemini APIs
  approvals list|show ID|approve ID|deny ID [--reason TEXT] [--admin ADDR]
                             held tool calls on the admin listener (token: $HOOKPROXY_ADMIN_TOKEN)
  pins     [--config FILE] [--admin ADDR] list | export | accept TOOL | forget TOOL
                             review tool-definition pins through the admin listener
  version                    print the version
`

// Main runs the hookproxy command line with args (without the program name) and returns
// the process exit code: 0 success, 1 failure, 2 usage error. cmd/hookproxy's main is
// os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:])
	case "validate":
		return runValidate(args[1:], stdout, stderr)
	case "backend":
		return runBackend(args[1:], stdin, stdout, stderr)
	case "replay":
		return runReplay(args[1:], stdout, stderr)
	case "test":
		return runTest(args[1:], stdout, stderr)
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "approvals":
		return runApprovals(args[1:], stdout, stderr)
	case "fake-model":
		return runFakeModel(args[1:], stdout, stderr)
	case "pins":
		return runPins(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "hookproxy: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
