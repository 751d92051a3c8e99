package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "hookproxy fake-model: listen %s: %v\n", *listen, err)
		return 1
	}
	hs := &http.Server{Handler: fakemodel.New().Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "hookproxy fake-model: imitation of the OpenAI and Anthropic APIs on http://%s (POST %s, POST %s, GET %s)\n",
		ln.Addr(), fakemodel.PathChatCompletions, fakemodel.PathMessages, fakemodel.PathReceived)
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case err := <-serveErr:
		fmt.Fprintf(stderr, "hookproxy fake-model: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return 0
}
