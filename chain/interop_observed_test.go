package chain

// The boundary-observation scenarios of the lifecycle suite: a boundary settles (deny,
// stop, an accepted rewrite) and observe subscriptions with their own content selection
// then receive the settled, effective event. They run through the real chain: the
// interceptor and every observer are loopback HTTP backends.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/registration"
)

type observedStep struct {
	Op           string `json:"op"`
	Key          string `json:"key"`
	Subscription string `json:"subscription"`
}

// observation is one hooks/observe an observer backend received.
type observation struct {
	EventID      string          `json:"eventId"`
	Subscription string          `json:"subscription"`
	Input        json.RawMessage `json:"input"`
}

func runObservedScenario(t *testing.T, sc *interopScenario) interopVerdict {
	var steps []observedStep
	if err := json.Unmarshal(sc.rawSteps, &steps); err != nil {
		return interopVerdict{"failed", "steps: " + err.Error()}
	}
	// The interceptor answers each request with its scenario response, by request id.
	byID := map[string]json.RawMessage{}
	for k, raw := range sc.Requests {
		var r struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return interopVerdict{"failed", "request " + k}
		}
		byID[r.ID] = sc.Responses[k]
	}
	icpt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID *string `json:"id"`
		}
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(byID[*m.ID])
	}))
	defer icpt.Close()
	hooks := []registration.Backend{{ID: scenarioBackendID, Transport: registration.Transport{Type: registration.TransportHTTP, URL: icpt.URL},
		Subscriptions: []registration.Subscription{icptSub(registration.FailClosed)}}}

	// One observer backend per subscription the steps name; the name is its content
	// selection ("metadata", "body").
	var mu sync.Mutex
	var seen []observation
	observers := map[string]bool{}
	for _, st := range steps {
		if st.Op != "observe" || observers[st.Subscription] {
			continue
		}
		observers[st.Subscription] = true
		name := st.Subscription
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var m struct {
				Method string `json:"method"`
				Params struct {
					Event struct {
						ID   string `json:"id"`
						Tool struct {
							Input json.RawMessage `json:"input"`
						} `json:"tool"`
					} `json:"event"`
				} `json:"params"`
			}
			body, _ := io.ReadAll(r.Body)
			if json.Unmarshal(body, &m) == nil && m.Method == ahp.MethodObserve {
				mu.Lock()
				seen = append(seen, observation{EventID: m.Params.Event.ID, Subscription: name, Input: m.Params.Event.Tool.Input})
				mu.Unlock()
			}
			// An observer's answer carries no effects; an attempt to answer with some is
			// ignored whatever it says.
			w.WriteHeader(http.StatusAccepted)
		}))
		defer srv.Close()
		hooks = append(hooks, registration.Backend{ID: "org.ahp.interop.observer." + name,
			Transport:     registration.Transport{Type: registration.TransportHTTP, URL: srv.URL},
			Subscriptions: []registration.Subscription{{Events: []string{ahp.EventToolBefore}, Mode: registration.ModeObserve, Content: map[string]string{"default": name}}}})
	}
	c, err := New(docOf(hooks...), Options{Source: "urn:hookproxy:interop", ObserveTimeout: testObserveTimeout})
	if err != nil {
		return interopVerdict{"failed", "chain: " + err.Error()}
	}
	defer c.Close()

	published := []string{}
	states := map[string]map[string]any{}
	for _, st := range steps {
		if st.Op != "send" {
			continue
		}
		var req interopRequest
		if err := json.Unmarshal(sc.Requests[st.Key], &req); err != nil {
			return interopVerdict{"failed", "request " + st.Key + ": " + err.Error()}
		}
		var ev ahp.Event
		var caps ahp.Capabilities
		if json.Unmarshal(req.Params.Event, &ev) != nil || json.Unmarshal(req.Params.Capabilities, &caps) != nil {
			return interopVerdict{"failed", "request " + st.Key + ": event or capabilities"}
		}
		s := c.Intercept(context.Background(), &ev, caps)
		s.Wait() // every observation of this boundary has been delivered
		if s.Records[0].Outcome == OutcomeFailed {
			return interopVerdict{"failed", fmt.Sprintf("request %s: reply rejected (%s)", st.Key, s.Records[0].Detail)}
		}
		published = append(published, ev.ID)
		states[ev.ID] = applicationResult(s, &ev, &caps)
	}

	// Observations in the order the steps name them.
	var observations []observation
	for _, st := range steps {
		if st.Op != "observe" {
			continue
		}
		var req struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(sc.Requests[st.Key], &req)
		mu.Lock()
		for _, o := range seen {
			if o.EventID == req.ID && o.Subscription == st.Subscription {
				observations = append(observations, o)
			}
		}
		mu.Unlock()
	}

	var diffs []string
	check := func(key string, got any) {
		want, ok := sc.Expected[key]
		if !ok {
			return
		}
		var w any
		_ = json.Unmarshal(want, &w)
		if !reflect.DeepEqual(normalize(got), w) {
			gb, _ := json.Marshal(got)
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", key, gb, want))
		}
	}
	check("published", published)
	check("cancelled", []string{})
	check("ignored", []string{})
	check("observations", observations)
	check("uploadStatuses", []string{})
	var wantStates map[string]map[string]json.RawMessage
	_ = json.Unmarshal(sc.Expected["states"], &wantStates)
	ids := make([]string, 0, len(wantStates))
	for id := range wantStates {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		got, ok := states[id]
		if !ok {
			diffs = append(diffs, "states."+id+": not published")
			continue
		}
		for k, want := range wantStates[id] { // a partial object: its keys only
			var w any
			_ = json.Unmarshal(want, &w)
			if !reflect.DeepEqual(normalize(got[k]), w) {
				gb, _ := json.Marshal(got[k])
				diffs = append(diffs, fmt.Sprintf("states.%s.%s = %s, want %s", id, k, gb, want))
			}
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		return interopVerdict{"failed", strings.Join(diffs, "; ")}
	}
	return interopVerdict{status: "passed"}
}

func icptSub(policy string) registration.Subscription {
	return icpt(policy, 10000, ahp.EventToolBefore)
}
