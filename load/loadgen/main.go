package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen upstream|hang-backend|streams|soak|hang|freeport [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{
		"upstream": runUpstream, "hang-backend": runHangBackend,
		"streams": runStreams, "soak": runSoak, "hang": runHang, "freeport": runFreePort,
	}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "loadgen: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// ---- servers ----

// runUpstream serves POST /v1/chat/completions: a JSON answer, or with "stream": true a
// paced SSE stream of text chunks (one every -chunk-delay).
func runUpstream(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address (loopback)")
	chunks := fs.Int("chunks", 20, "text chunks per stream")
	delay := fs.Duration("chunk-delay", 50*time.Millisecond, "pause between chunks")
	_ = fs.Parse(args)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"stream":true`)) && !bytes.Contains(body, []byte(`"stream": true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-load","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for i := 0; i < *chunks; i++ {
			if i > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(*delay):
				}
			}
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"},\"finish_reason\":null}]}\n\n", i)
			if fl != nil {
				fl.Flush()
			}
		}
		_, _ = io.WriteString(w, "data: {\"id\":\"chatcmpl-load\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	return serve(*listen, mux)
}

// runHangBackend is an AHP HTTP backend that reads each hooks/intercept request and never
// answers it, until the caller gives up.
func runHangBackend(args []string) error {
	fs := flag.NewFlagSet("hang-backend", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address (loopback)")
	_ = fs.Parse(args)
	var held atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ahp/hooks", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		held.Add(1)
		defer held.Add(-1)
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /held", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, held.Load()) })
	return serve(*listen, mux)
}

// serve listens on a loopback address, prints "LISTEN <addr>" and serves until SIGTERM.
func serve(addr string, h http.Handler) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return fmt.Errorf("listen address %q: loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// runFreePort prints a loopback port free at the time of asking (for configurations that
// need a fixed one, such as hookproxy's listen and admin addresses, which must differ).
func runFreePort([]string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

// ---- clients ----

const streamBody = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"Summarise the deploy log in three words."}]}`
const smallBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"Say ok."}]}`

func client(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}}
}

// runStreams opens -n streams at once through the proxy, each paced by the upstream, and
// samples the proxy's RSS (-pid) while they are all open: memory per stream is the growth
// over the idle RSS divided by the streams.
func runStreams(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ExitOnError)
	url := fs.String("url", "", "proxy chat completions URL")
	n := fs.Int("n", 1000, "concurrent streams")
	pid := fs.Int("pid", 0, "proxy process id, for RSS")
	limit := fs.Duration("timeout", 60*time.Second, "bound on the whole run")
	maxPerStream := fs.Int64("max-kib-per-stream", 256, "fail above this RSS growth per stream (KiB)")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	idle := rssKiB(*pid)
	c := client(*n)
	var ok, failed, events atomic.Int64
	var wg sync.WaitGroup
	var firstMu sync.Mutex
	var firsts []time.Duration
	opened := make(chan struct{}, *n)
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *url, strings.NewReader(streamBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-load-test")
			res, err := c.Do(req)
			if err != nil {
				failed.Add(1)
				opened <- struct{}{}
				return
			}
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			first, done := true, false
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				if first {
					first = false
					firstMu.Lock()
					firsts = append(firsts, time.Since(start))
					firstMu.Unlock()
					opened <- struct{}{}
				}
				events.Add(1)
				if line == "data: [DONE]" {
					done = true
				}
			}
			if first {
				opened <- struct{}{}
			}
			if res.StatusCode == 200 && done {
				ok.Add(1)
			} else {
				failed.Add(1)
			}
		}()
	}
	// Every stream has its first event (or failed): all are open now; sample RSS until they end.
	for i := 0; i < *n; i++ {
		select {
		case <-opened:
		case <-ctx.Done():
			return fmt.Errorf("streams did not open within %s", *limit)
		}
	}
	peak := idle
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if r := rssKiB(*pid); r > peak {
				peak = r
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	wg.Wait()
	close(stop)
	sampler.Wait()
	perStream := int64(0)
	if *n > 0 && peak > idle {
		perStream = (peak - idle) / int64(*n)
	}
	fmt.Printf("LOAD streams n=%d ok=%d failed=%d events=%d first_event_p50=%s first_event_p99=%s rss_idle_kib=%d rss_peak_kib=%d kib_per_stream=%d\n",
		*n, ok.Load(), failed.Load(), events.Load(), pct(firsts, 50), pct(firsts, 99), idle, peak, perStream)
	switch {
	case failed.Load() > 0:
		return fmt.Errorf("%d of %d streams failed", failed.Load(), *n)
	case *pid != 0 && perStream > *maxPerStream:
		return fmt.Errorf("%d KiB per stream, above the %d KiB bound", perStream, *maxPerStream)
	}
	return nil
}

// runSoak sends requests at a steady -rate for -duration (alternating JSON and streamed)
// and samples the proxy's goroutines, open files and heap goal from its Prometheus endpoint:
// after a warm-up quarter, the last third of the run must not grow beyond the first third by
// more than -growth (plus a small absolute slack).
func runSoak(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	url := fs.String("url", "", "proxy chat completions URL")
	metricsURL := fs.String("metrics", "", "proxy /metrics URL")
	rate := fs.Int("rate", 50, "requests per second")
	duration := fs.Duration("duration", 10*time.Minute, "how long")
	every := fs.Duration("sample", 5*time.Second, "sampling interval")
	growth := fs.Float64("growth", 0.25, "allowed relative growth of the last third over the first")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	c := client(64)
	var sent, ok, failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(*rate, 1)))
	defer tick.Stop()
	var samples []soakSample
	sampleTick := time.NewTicker(*every)
	defer sampleTick.Stop()
loop:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break loop
		case <-sampleTick.C:
			m, err := scrape(*metricsURL)
			if err != nil {
				return err
			}
			// The heap goal (twice the live heap after the last collection) follows what
			// stays alive; heap in use swings with every collection cycle.
			samples = append(samples, soakSample{m["go_goroutines"], m["process_open_fds"], m["go_memstats_next_gc_bytes"], m["go_gc_duration_seconds_count"]})
		case <-tick.C:
			body := smallBody
			if i%2 == 1 {
				body = streamBody
			}
			sent.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer rcancel()
				req, _ := http.NewRequestWithContext(rctx, http.MethodPost, *url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				res, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode == 200 {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	grew, err := soakGrowth(samples, *growth, os.Stdout)
	fmt.Printf("LOAD soak sent=%d ok=%d failed=%d duration=%s rate=%d samples=%d\n", sent.Load(), ok.Load(), failed.Load(), *duration, *rate, len(samples))
	switch {
	case err != nil:
		return err
	case failed.Load() > 0:
		return fmt.Errorf("%d requests failed", failed.Load())
	case len(grew) > 0:
		return fmt.Errorf("grew over the run: %s", strings.Join(grew, ", "))
	}
	return nil
}

// soakSample is one scrape of the proxy's metrics during a soak.
type soakSample struct{ goroutines, fds, heap, collections float64 }

// soakGrowth names what grew over a soak: the first quarter of samples is warm-up
// (connections, pools, caches filling); of the rest, the last third must not exceed the
// first by more than growth plus a small absolute slack. It writes one LOAD line a measure.
func soakGrowth(samples []soakSample, growth float64, w io.Writer) ([]string, error) {
	samples = samples[len(samples)/4:]
	if len(samples) < 3 {
		return nil, fmt.Errorf("only %d samples after warm-up: run longer or sample more often", len(samples))
	}
	third := len(samples) / 3
	avg := func(s []soakSample, f func(soakSample) float64) float64 {
		t := 0.0
		for _, x := range s {
			t += f(x)
		}
		return t / float64(len(s))
	}
	first, last := samples[:third], samples[len(samples)-third:]
	// The heap goal only moves when the collector runs: with fewer than two collections
	// between the thirds, a difference says when the one collection happened (for instance
	// while the streams test's connections were still alive), not whether the heap grows.
	collections := last[len(last)-1].collections - first[0].collections
	var grew []string
	for _, m := range []struct {
		name string
		f    func(soakSample) float64
		// slack is an absolute allowance: a handful of goroutines or files, a few MiB.
		slack float64
	}{
		{"goroutines", func(s soakSample) float64 { return s.goroutines }, 20},
		{"open_fds", func(s soakSample) float64 { return s.fds }, 20},
		{"heap_goal", func(s soakSample) float64 { return s.heap }, 8 << 20},
	} {
		a, b := avg(first, m.f), avg(last, m.f)
		if m.name == "heap_goal" && collections < 2 {
			fmt.Fprintf(w, "LOAD soak %s first=%.0f last=%.0f collections=%.0f: too few collections to judge, not checked\n", m.name, a, b, collections)
			continue
		}
		fmt.Fprintf(w, "LOAD soak %s first=%.0f last=%.0f\n", m.name, a, b)
		if b > a*(1+growth)+m.slack {
			grew = append(grew, m.name)
		}
	}
	return grew, nil
}

// runHang sends -n concurrent requests through a proxy whose model.request.before backend
// never answers: each must be refused (fail-closed) within the subscription's timeout plus
// -slack, and a request after them must still be served promptly.
func runHang(args []string) error {
	fs := flag.NewFlagSet("hang", flag.ExitOnError)
	url := fs.String("url", "", "proxy URL of the route with the hanging backend")
	n := fs.Int("n", 500, "concurrent requests")
	timeout := fs.Duration("backend-timeout", time.Second, "the subscription's timeoutMs")
	slack := fs.Duration("slack", 2*time.Second, "allowed beyond the timeout")
	_ = fs.Parse(args)
	c := client(*n)
	lat := make([]time.Duration, *n)
	codes := make([]int, *n)
	var wg sync.WaitGroup
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), *timeout+*slack+10*time.Second)
			defer cancel()
			start := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, *url, strings.NewReader(smallBody))
			req.Header.Set("Content-Type", "application/json")
			res, err := c.Do(req)
			lat[i] = time.Since(start)
			if err != nil {
				codes[i] = -1
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			codes[i] = res.StatusCode
		}()
	}
	wg.Wait()
	byCode := map[int]int{}
	for _, c := range codes {
		byCode[c]++
	}
	worst := slicesMax(lat)
	fmt.Printf("LOAD hang n=%d codes=%v p50=%s p99=%s max=%s bound=%s\n", *n, byCode, pct(lat, 50), pct(lat, 99), worst, *timeout+*slack)
	if worst > *timeout+*slack {
		return fmt.Errorf("a request waited %s, beyond the backend timeout %s + %s", worst, *timeout, *slack)
	}
	if byCode[-1] > 0 || byCode[200] > 0 {
		return fmt.Errorf("every request must be refused fail-closed: %v", byCode)
	}
	return nil
}

// ---- helpers ----

func rssKiB(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// scrape reads the unlabelled samples of a Prometheus text endpoint.
func scrape(url string) (map[string]float64, error) {
	res, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out, sc.Err()
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i >= len(s) {
		i = len(s) - 1
	}
	if i > 0 {
		i--
	}
	return s[i].Round(time.Millisecond)
}

func slicesMax(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m.Round(time.Millisecond)
}
