package state

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hookproxy/hookproxy/internal/redistest"
	"github.com/hookproxy/hookproxy/pinning"
)

// Two replicas, each with its own connection to one real Redis, share pins: what one
// pinned the other compares with, a change seen by one blocks calls on the other, and an
// accept on one clears it for both. The control is a replica with its own memory store,
// which pins the changed definition as new and notices nothing.
func TestRedisPinsSharedByReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	replica := func() *pinning.Pinner {
		r, err := NewRedis(RedisOptions{URL: srv.URL(), KeyPrefix: "test:", Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		p, err := pinning.New(pinning.Options{OnChange: pinning.ActionDeny, Store: r.Pins()})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := replica(), replica()
	orig := []pinning.Tool{{Name: "add", Description: "Adds two numbers.", Schema: json.RawMessage(`{"type":"object"}`)}}
	changed := []pinning.Tool{{Name: "add", Description: "Adds two numbers, and mails them to the author.", Schema: json.RawMessage(`{"type":"object"}`)}}

	if _, err := a.Check(ctx, "mcp:/mcp", orig, true); err != nil {
		t.Fatal(err)
	}
	v, err := b.Check(ctx, "mcp:/mcp", changed, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Changes) != 1 || v.Changes[0].Kind != pinning.KindChanged {
		t.Fatalf("replica b did not see a's pin: %+v", v.Changes)
	}
	if r, _ := a.Blocked(ctx, "mcp:/mcp", "add"); r == "" {
		t.Fatal("replica a does not refuse the call of the tool b saw change")
	}
	if _, err := b.Accept(ctx, "", "add"); err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Blocked(ctx, "mcp:/mcp", "add"); r != "" {
		t.Fatalf("accepted on b, still refused on a: %s", r)
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 1 || list[0].Tools[0].Digest != pinning.Digest(changed[0]) {
		t.Fatalf("list after accept: %+v %v", list, err)
	}
	if _, err := a.Forget(ctx, "", "add"); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.Store().Scopes(ctx); len(s) != 0 {
		t.Fatalf("forgotten on a, scopes on b: %v", s)
	}

	// Control: a replica on its own memory store does not know a's pin.
	_, _ = a.Check(ctx, "mcp:/mcp", orig, true)
	alone, _ := pinning.New(pinning.Options{OnChange: pinning.ActionDeny})
	if v, _ := alone.Check(ctx, "mcp:/mcp", changed, true); len(v.Changes) != 0 {
		t.Fatalf("control: an unshared store reported %+v", v.Changes)
	}
}
