package policies

import (
	"context"
	"sync"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
)

// One policy instance serves every request concurrently: it must hold no per-request state.
// (Run with -race.)
func TestPoliciesConcurrentUse(t *testing.T) {
	tools, err := NewTools(ToolsConfig{Destructive: true})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		p    ahp.Interceptor
		ev   func() *ahp.Event
		want string
	}{
		{mustSecrets(t), secretsRequest, ahp.EffectModify},
		{mustPII(t), func() *ahp.Event {
			return requestEvent(msg("m1", ahp.RoleUser, text("m1p0", "mail "+testEmail)))
		}, ahp.EffectModify},
		{mustInjection(t), injectedOutput, ahp.EffectInject},
		{tools, func() *ahp.Event { return toolBeforeEvent("Bash", `{"command":"rm -rf /"}`) }, ahp.EffectDeny},
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				for _, c := range cases {
					ev := c.ev()
					res, err := c.p.Intercept(context.Background(), &ahp.InterceptRequest{ID: ev.ID,
						Params: &ahp.InterceptParams{Event: ev, Capabilities: proxyCaps(ev.Type)}})
					if err != nil || len(res.Effects) != 1 || res.Effects[0].Type != c.want {
						t.Errorf("concurrent %T: %v %v", c.p, res, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
