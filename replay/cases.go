package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/hookproxy/hookproxy/capture"
	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/enforcement"
	"github.com/hookproxy/hookproxy/proxy"
)

// Suite is one file of policy test cases.
//
//	config: hookproxy.yaml       # optional, relative to this file
//	cases:
//	  - name: a recursive delete is refused
//	    event: {type: tool.before, tool: {name: Bash, input: {command: "rm -rf /"}}}
//	    expect: refused
//	  - name: a plain question is forwarded
//	    route: /openai
//	    request: {path: /v1/chat/completions, body: {model: gpt-4o, messages: [...]}}
//	    response: {body: {...}}      # what the upstream answers (optional)
//	    expect: forwarded
type Suite struct {
	Config string `yaml:"config"`
	Cases  []Case `yaml:"cases"`
}

// Case is one policy test case: a canonical event settled by the chain, or a native
// request (and the upstream's response) sent through the real proxy on a route.
type Case struct {
	Name string `yaml:"name"`
	// Event is a canonical AHP event; id, source and time are filled in when left out.
	Event map[string]any `yaml:"event"`
	// Route, Request and Response make a native case.
	Route    string    `yaml:"route"`
	Request  *Exchange `yaml:"request"`
	Response *Exchange `yaml:"response"`
	// Boundary narrows a native case's expectation to boundaries of one event type.
	Boundary string `yaml:"boundary"`
	// Expect is the outcome: forwarded, rewritten, refused, supplied or stopped. For a
	// native case, forwarded means every boundary forwarded; anything else, that some
	// boundary had that outcome.
	Expect enforcement.Action `yaml:"expect"`
}

// Exchange is a native HTTP message of a case.
type Exchange struct {
	Method  string            `yaml:"method"` // request only; default POST
	Path    string            `yaml:"path"`   // request only, below the route prefix
	Status  int               `yaml:"status"` // response only; default 200
	Headers map[string]string `yaml:"headers"`
	Body    any               `yaml:"body"` // a YAML value sent as JSON, or a string sent as is
}

// LoadSuite reads and checks a case file.
func LoadSuite(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Suite
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(s.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	for i, c := range s.Cases {
		where := fmt.Sprintf("%s: cases[%d]", path, i)
		if c.Name == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		switch c.Expect {
		case enforcement.Forwarded, enforcement.Rewritten, enforcement.Refused, enforcement.Supplied, enforcement.Stopped:
		default:
			return nil, fmt.Errorf("%s (%s): expect %q is not forwarded, rewritten, refused, supplied or stopped", where, c.Name, c.Expect)
		}
		switch {
		case c.Event != nil && c.Request != nil:
			return nil, fmt.Errorf("%s (%s): give an event or a request, not both", where, c.Name)
		case c.Event != nil:
		case c.Request != nil:
			if c.Route == "" || c.Request.Path == "" {
				return nil, fmt.Errorf("%s (%s): a native case needs route and request.path", where, c.Name)
			}
		default:
			return nil, fmt.Errorf("%s (%s): an event or a request is required", where, c.Name)
		}
	}
	return &s, nil
}

// Result is the outcome of one case.
type Result struct {
	Name string
	Pass bool
	Got  string // the outcomes seen, for a failure message
}

// RunCase runs one case against cfg and its chain.
func RunCase(ctx context.Context, cfg *config.Config, ch *chain.Chain, c *Case) (Result, error) {
	if c.Event != nil {
		return runEventCase(ctx, ch, c)
	}
	return runNativeCase(ctx, cfg, ch, c)
}

func runEventCase(ctx context.Context, ch *chain.Chain, c *Case) (Result, error) {
	raw, err := json.Marshal(c.Event)
	if err != nil {
		return Result{}, fmt.Errorf("%s: event: %v", c.Name, err)
	}
	var ev ahp.Event
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&ev); err != nil {
		return Result{}, fmt.Errorf("%s: event: %v", c.Name, err)
	}
	if ev.ID == "" {
		ev.ID = "test-" + strings.Join(strings.Fields(c.Name), "-")
	}
	if ev.Source == "" {
		ev.Source = "urn:hookproxy:test"
	}
	if ev.Time == "" {
		ev.Time = "2026-01-01T00:00:00Z"
	}
	caps, ok := proxy.CapabilitiesFor(ev.Type)
	if !ok {
		return Result{}, fmt.Errorf("%s: event type %q is not a boundary the proxy intercepts", c.Name, ev.Type)
	}
	raw, _ = json.Marshal(&ev)
	if err := ahp.ValidateEvent(raw); err != nil {
		return Result{}, fmt.Errorf("%s: event: %v", c.Name, err)
	}
	capsRaw, _ := json.Marshal(&caps)
	got, err := Settle(ctx, ch, &capture.Line{Event: raw, EventID: ev.ID, Capabilities: capsRaw})
	if err != nil {
		return Result{}, err
	}
	return Result{Name: c.Name, Pass: got.Outcome == c.Expect, Got: string(got.Outcome) + denialNote(got.Denial)}, nil
}

func denialNote(d *capture.Denial) string {
	if d == nil || d.Code == "" {
		return ""
	}
	return " (" + d.Code + ")"
}

func runNativeCase(ctx context.Context, cfg *config.Config, ch *chain.Chain, c *Case) (Result, error) {
	resp := c.Response
	if resp == nil {
		resp = &Exchange{}
	}
	respBody, err := bodyBytes(resp.Body)
	if err != nil {
		return Result{}, fmt.Errorf("%s: response.body: %v", c.Name, err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		status := resp.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write(respBody)
	}))
	defer up.Close()

	run := *cfg
	run.Routes = append([]config.Route(nil), cfg.Routes...)
	found := false
	for i := range run.Routes {
		run.Routes[i].Upstream = up.URL
		found = found || run.Routes[i].Prefix == c.Route
	}
	if !found {
		return Result{}, fmt.Errorf("%s: route %q is not in the configuration", c.Name, c.Route)
	}
	var mu sync.Mutex
	var got []proxy.BoundaryRecord
	srv, err := proxy.New(&run, ch, proxy.Options{
		Logger: zap.NewNop(),
		Auditor: proxy.AuditorFunc(func(_ context.Context, rec proxy.BoundaryRecord) {
			mu.Lock()
			got = append(got, rec)
			mu.Unlock()
		}),
		MCPHandler: proxy.NewMCPHandler,
	})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %v", c.Name, err)
	}
	defer srv.Close()
	front := httptest.NewServer(srv)
	defer front.Close()

	reqBody, err := bodyBytes(c.Request.Body)
	if err != nil {
		return Result{}, fmt.Errorf("%s: request.body: %v", c.Name, err)
	}
	method := c.Request.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, front.URL+c.Route+c.Request.Path, bytes.NewReader(reqBody))
	if err != nil {
		return Result{}, fmt.Errorf("%s: %v", c.Name, err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.Request.Headers {
		req.Header.Set(k, v)
	}
	res, err := front.Client().Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %v", c.Name, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	srv.Close() // waits for nothing; records are delivered before the response ends

	mu.Lock()
	defer mu.Unlock()
	var seen []string
	pass := c.Expect == enforcement.Forwarded
	for _, r := range got {
		if c.Boundary != "" && r.EventType != c.Boundary {
			continue
		}
		seen = append(seen, r.EventType+":"+string(r.Enforcement))
		if c.Expect == enforcement.Forwarded {
			pass = pass && r.Enforcement == enforcement.Forwarded
		} else if r.Enforcement == c.Expect {
			pass = true
		}
	}
	g := strings.Join(seen, ", ")
	if g == "" {
		g = "no boundary settled"
	}
	return Result{Name: c.Name, Pass: pass, Got: fmt.Sprintf("HTTP %d; %s", res.StatusCode, g)}, nil
}

// bodyBytes encodes a case body: a string as is, anything else as JSON.
func bodyBytes(v any) ([]byte, error) {
	switch b := v.(type) {
	case nil:
		return []byte("{}"), nil
	case string:
		return []byte(b), nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, errors.New("cannot be written as JSON: " + err.Error())
	}
	return out, nil
}
