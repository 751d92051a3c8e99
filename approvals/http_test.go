package approvals

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/admin"
)

func adminServer(t *testing.T, s *Service) string {
	t.Helper()
	h := admin.New(admin.Options{Protected: s.Routes, Auth: &admin.Auth{Tokens: []admin.Token{
		{Name: "carol", Secret: func() (string, error) { return "carol-token", nil }}}}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func call(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestAdminEndpoints(t *testing.T) {
	s := newService(t, NewMemory(), 30*time.Second)
	base := adminServer(t, s)

	// Events first, so the stream sees the creation and the decision.
	req, _ := http.NewRequest(http.MethodGet, base+"/approvals/events", nil)
	req.Header.Set("Authorization", "Bearer carol-token")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evResp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer evResp.Body.Close()
	events := bufio.NewReader(evResp.Body)
	readUntil := func(want string) {
		t.Helper()
		var b strings.Builder
		for !strings.Contains(b.String(), want) {
			line, err := events.ReadString('\n')
			if err != nil {
				t.Fatalf("events ended before %q: %v %s", want, err, b.String())
			}
			b.WriteString(line)
		}
	}
	readUntil(": ready")

	rec, out := hold(t, s, push)
	readUntil(`"state":"pending"`)

	for _, tc := range []struct {
		method, path, token, body string
		status                    int
	}{
		{"GET", "/approvals", "", "", 401},
		{"POST", "/approvals/" + rec.ID, "", `{"decision":"approve"}`, 401},
		{"POST", "/approvals/" + rec.ID, "wrong", `{"decision":"approve"}`, 401},
		{"GET", "/approvals?state=bogus", "carol-token", "", 400},
		{"GET", "/approvals/apr_nope", "carol-token", "", 404},
		{"POST", "/approvals/apr_nope", "carol-token", `{"decision":"approve"}`, 404},
		{"POST", "/approvals/" + rec.ID, "carol-token", `{"decision":"maybe"}`, 400},
		{"POST", "/approvals/" + rec.ID, "carol-token", `not json`, 400},
	} {
		if status, b := call(t, tc.method, base+tc.path, tc.token, tc.body); status != tc.status {
			t.Errorf("%s %s (token %q): %d %s, want %d", tc.method, tc.path, tc.token, status, b, tc.status)
		}
	}
	// The refusals above decided nothing.
	status, b := call(t, "GET", base+"/approvals?state=pending", "carol-token", "")
	var list []Record
	if status != 200 || json.Unmarshal(b, &list) != nil || len(list) != 1 || list[0].ID != rec.ID {
		t.Fatalf("pending list: %d %s", status, b)
	}
	status, b = call(t, "POST", base+"/approvals/"+rec.ID, "carol-token", `{"decision":"approve","reason":"fine"}`)
	var got Record
	if status != 200 || json.Unmarshal(b, &got) != nil || got.State != StateApproved || got.DecidedBy != "carol" || got.Reason != "fine" || got.DecidedAt == nil {
		t.Fatalf("approve: %d %s", status, b)
	}
	if o := outcome(t, out); !o.Approved || o.By != "carol" {
		t.Fatalf("outcome %+v", o)
	}
	readUntil(`"state":"approved"`)
	// Replayed: 409, the record unchanged.
	if status, b := call(t, "POST", base+"/approvals/"+rec.ID, "carol-token", `{"decision":"deny"}`); status != 409 || !strings.Contains(string(b), `"state": "approved"`) {
		t.Fatalf("replay: %d %s", status, b)
	}
	if status, b := call(t, "GET", base+"/approvals?state=decided", "carol-token", ""); status != 200 || !strings.Contains(string(b), rec.ID) {
		t.Fatalf("decided list: %d %s", status, b)
	}
	if status, b := call(t, "GET", base+"/approvals/"+rec.ID, "carol-token", ""); status != 200 || !strings.Contains(string(b), `"decidedBy": "carol"`) {
		t.Fatalf("show: %d %s", status, b)
	}
}

// A notification per new pending record, in either format, with a link to the record; a
// webhook that does not answer does not hold the call longer.
func TestNotify(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]byte{}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got[r.URL.Path] = b
		mu.Unlock()
	}))
	defer hook.Close()
	stuck := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-stuck }))
	defer slow.Close()
	defer close(stuck)
	s, err := New(Options{Store: NewMemory(), Timeout: 30 * time.Second, LinkBase: "https://admin.example",
		Notify: []Notify{{URL: slow.URL}, {URL: hook.URL + "/json", Format: FormatJSON}, {URL: hook.URL + "/slack", Format: FormatSlack}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, out := hold(t, s, push)
	if _, err := s.Decide(context.Background(), rec.ID, DecisionApprove, "x", "", ""); err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, out); !o.Approved {
		t.Fatal("the slow webhook held the call")
	}
	// The notifier sends to the targets in order; the slow one is first, so release it.
	stuck <- struct{}{}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var ev PendingEvent
	if err := json.Unmarshal(got["/json"], &ev); err != nil || ev.Type != "approval.pending" || ev.Approval.ID != rec.ID ||
		ev.Link != "https://admin.example/approvals/"+rec.ID || ev.Approval.State != StatePending {
		t.Fatalf("json notification %s (%v)", got["/json"], err)
	}
	var slack struct{ Text string }
	if err := json.Unmarshal(got["/slack"], &slack); err != nil || !strings.Contains(slack.Text, "Bash") || !strings.Contains(slack.Text, "<https://admin.example/approvals/"+rec.ID+"|") {
		t.Fatalf("slack notification %s (%v)", got["/slack"], err)
	}
	s.notifier.cancel() // let the slow request end before Close waits for the worker
	_ = s.Close()
}
