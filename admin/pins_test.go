package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookproxy/hookproxy/pinning"
)

func pinsServer(t *testing.T, p *pinning.Pinner) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(New(Options{Protected: PinsRoutes(func() *pinning.Pinner { return p })}))
	t.Cleanup(func() { srv.Close(); http.DefaultClient.CloseIdleConnections() })
	return srv
}

func postPin(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

func TestPinsEndpoints(t *testing.T) {
	ctx := context.Background()
	p, _ := pinning.New(pinning.Options{})
	tools := []pinning.Tool{{Name: "add", Description: "Adds."}}
	_, _ = p.Check(ctx, "mcp:a", tools, true)
	_, _ = p.Check(ctx, "mcp:b", tools, true)
	srv := pinsServer(t, p)

	resp, err := http.Get(srv.URL + "/pins")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /pins: %v %v", resp, err)
	}
	var l PinsList
	_ = json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if l.Mode != "tofu" || len(l.Scopes) != 2 {
		t.Fatalf("list: %+v", l)
	}
	// The name is in two scopes: 409 names them; with a scope it is forgotten there only.
	if code, body := postPin(t, srv.URL+"/pins/forget", `{"tool":"add"}`); code != 409 || !strings.Contains(body, "mcp:a") || !strings.Contains(body, "mcp:b") {
		t.Fatalf("ambiguous forget: %d %s", code, body)
	}
	if code, body := postPin(t, srv.URL+"/pins/forget", `{"tool":"add","scope":"mcp:a"}`); code != 200 || !strings.Contains(body, `"scope": "mcp:a"`) {
		t.Fatalf("forget in a scope: %d %s", code, body)
	}
	if code, _ := postPin(t, srv.URL+"/pins/accept", `{"tool":"nope"}`); code != 404 {
		t.Fatalf("accept unknown: %d", code)
	}
	if code, _ := postPin(t, srv.URL+"/pins/accept", `{"tools":"add"}`); code != 400 {
		t.Fatalf("a malformed body: %d", code)
	}
	// Pinning off: every endpoint answers 404.
	off := pinsServer(t, nil)
	resp, err = http.Get(off.URL + "/pins")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("pinning off: %d", resp.StatusCode)
	}
}
