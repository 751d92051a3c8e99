package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hookproxy/hookproxy/app"
	"github.com/hookproxy/hookproxy/internal/fakemodel"
)

// defaultFakeModelListen is where `hookproxy fake-model` listens unless told otherwise.
const defaultFakeModelListen = "127.0.0.1:8000"

// runFakeModel is `hookproxy fake-model [--listen ADDR]`: only the offline imitation of
// the OpenAI and Anthropic APIs that `hookproxy demo` embeds, for docker compose's demo
// profile or for pointing your own hookproxy configuration at it.
func runFakeModel(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("fake-model", flag.ContinueOnError)
	flags.SetOutput(stderr)
	listen := flags.String("listen", defaultFakeModelListen, "address to serve the imitation on")
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "hookproxy fake-model: unexpected arguments %q\n", flags.Args())
		return 2
	}
	ctx, stop := app.StopSignals(context.Background())
	defer stop()
	err := app.ServeFakeModel(ctx, *listen, func(addr string) {
		fmt.Fprintf(stdout, "hookproxy fake-model: imitation of the OpenAI and Anthropic APIs on http://%s (POST %s, POST %s, GET %s)\n",
			addr, fakemodel.PathChatCompletions, fakemodel.PathMessages, fakemodel.PathReceived)
	})
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy fake-model: %v\n", err)
		return 1
	}
	return 0
}
