package policies

import (
	"context"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
	"github.com/hookproxy/hookproxy/internal/testsupport"
	"github.com/hookproxy/hookproxy/mapping/anthropic"
)

// BenchmarkSecretsAgentHistory is the secrets scan of one agent request of ~300 KB
// (testsupport.AgentHistory) as the proxy runs it: every iteration is a new request, its
// body a new copy decoded by the real codec (not timed) and scanned with a digest memo of
// its own. "first" scans with an empty result cache; "again" is the same history sent
// again, every text already judged, which is what all but the newest turn of an agent's
// request is.
func BenchmarkSecretsAgentHistory(b *testing.B) {
	body := testsupport.AgentHistory(300 << 10)
	caps := proxyCaps(ahp.EventModelRequestBefore)
	codec := anthropic.NewMessages()
	p := mustSecrets(b)
	request := func() (*ahp.InterceptRequest, context.Context) {
		req, err := codec.DecodeRequest(append([]byte(nil), body...))
		if err != nil {
			b.Fatal(err)
		}
		ev := requestEvent(req.Items...)
		ev.Params = req.Params // the tool definitions above all
		ctx := transport.WithTextDigests(context.Background(), transport.NewTextDigests())
		return &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{ProtocolVersion: ahp.ProtocolVersion,
			Event: ev, Capabilities: caps}}, ctx
	}
	run := func(b *testing.B, fresh bool) {
		testsupport.BenchThreadCPU(b, int64(len(body)), func() func() {
			req, ctx := request()
			if fresh {
				p.scan.cache = newScanCache(scanCacheBytes)
			}
			return func() {
				res, err := p.Intercept(ctx, req)
				if err != nil || len(res.Effects) > 0 {
					b.Fatalf("%v %s", err, describeEffects(res))
				}
			}
		})
	}
	b.Run("first", func(b *testing.B) { run(b, true) })
	req, ctx := request()
	if _, err := p.Intercept(ctx, req); err != nil {
		b.Fatal(err)
	}
	b.Run("again", func(b *testing.B) { run(b, false) })
}
