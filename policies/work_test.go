package policies

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hookproxy/hookproxy/chain/ahp"
	"github.com/hookproxy/hookproxy/chain/transport"
)

// craftedPrompts are 2 MiB prompts made of what each scanner re-reads most: every "eyJ-"
// starts a JWT candidate whose run of base64url characters goes on for the whole window,
// every "sk-" three OpenAI key expressions, every "(1" a phone-number parse, every
// "ignore " an injection expression.
var craftedPrompts = map[string]string{
	// (a part of each is enough to exceed a 32 MiB budget: controlFraction)
	PolicySecrets:   strings.Repeat("eyJ-", (2<<20)/4),
	"secrets-sk":    strings.Repeat("sk-", (2<<20)/3),
	PolicyPII:       strings.Repeat("(1", (2<<20)/2),
	PolicyInjection: strings.Repeat("ignore ", (2<<20)/7),
}

// controlFraction is the part of each crafted prompt the unbounded controls scan: enough
// to cost more than the tests' budget, little enough to keep the tests short.
var controlFraction = map[string]int{PolicySecrets: 64, "secrets-sk": 64, PolicyPII: 2, PolicyInjection: 16}

func scanningPolicy(t *testing.T, name string) ahp.Interceptor {
	t.Helper()
	if name == "secrets-sk" {
		name = PolicySecrets
	}
	cfg := `{}`
	if name == PolicyInjection {
		cfg = `{"action": "deny", "requests": true}`
	}
	p, err := Factories()[name]([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func interceptWith(ctx context.Context, p ahp.Interceptor, ev *ahp.Event) (*ahp.InterceptResult, error) {
	return p.Intercept(ctx, &ahp.InterceptRequest{ID: ev.ID, Params: &ahp.InterceptParams{
		ProtocolVersion: ahp.ProtocolVersion, Event: ev, Capabilities: proxyCaps(ev.Type)}})
}

// TestPolicyWorkIsBoundedByTheRequestBudget: a crafted 2 MiB prompt is refused with the
// work-budget code once the request's budget is spent, and the work done stops there
// (the budget's counter ends within one check step of its limit). Controls: the same
// scanner without a budget does more work on a part of that prompt, and a 2 MiB
// prompt of ordinary prose passes under the same budget.
func TestPolicyWorkIsBoundedByTheRequestBudget(t *testing.T) {
	const limit = 32 << 20
	// One check step plus the largest single match cost a scan may add past a check.
	const overshoot = meterStep + privateKeyMatchCost + openAIMatchCost + jwtMatchCost
	prose := strings.Repeat("The build passed; the report lists 3 warnings and no errors. ", (2<<20)/62)
	for name, prompt := range craftedPrompts {
		t.Run(name, func(t *testing.T) {
			p := scanningPolicy(t, name)
			// Control: unbounded, a part of the prompt already costs more than the limit.
			free := transport.NewWorkBudget(1 << 62)
			if _, err := interceptWith(transport.WithWorkBudget(context.Background(), free), p,
				requestEvent(msg("m1", ahp.RoleUser, text("p1", prompt[:len(prompt)/controlFraction[name]])))); err != nil {
				t.Fatal(err)
			}
			if free.Spent() <= limit {
				t.Fatalf("control: 1/%d of the crafted prompt costs only %d units; the test needs more than %d", controlFraction[name], free.Spent(), limit)
			}

			b := transport.NewWorkBudget(limit)
			ev := requestEvent(msg("m1", ahp.RoleUser, text("p1", prompt)))
			res, err := interceptWith(transport.WithWorkBudget(context.Background(), b), p, ev)
			if err != nil {
				t.Fatal(err)
			}
			checkReply(t, ev, proxyCaps(ev.Type), res)
			if e := onlyEffect(t, res, ahp.EffectDeny); e.Code != WorkBudgetCode {
				t.Fatalf("refusal %+v", e)
			}
			if b.Spent() > limit+overshoot {
				t.Errorf("the work went on past the budget: %d units spent of %d", b.Spent(), limit)
			}

			// Control: ordinary prose of the same size passes under the same budget.
			ok := transport.NewWorkBudget(limit)
			res, err = interceptWith(transport.WithWorkBudget(context.Background(), ok), p,
				requestEvent(msg("m1", ahp.RoleUser, text("p1", prose))))
			if err != nil {
				t.Fatal(err)
			}
			noEffects(t, res)
		})
	}
}

// TestPolicyWorkBudgetIsSharedByTheRequest: the budget a request carries is spent by every
// policy and boundary it reaches, so two scans that each fit are refused together.
func TestPolicyWorkBudgetIsSharedByTheRequest(t *testing.T) {
	p := scanningPolicy(t, PolicySecrets)
	prompt := craftedPrompts[PolicySecrets][:16<<10]
	probe := transport.NewWorkBudget(1 << 62)
	if _, err := interceptWith(transport.WithWorkBudget(context.Background(), probe), p,
		requestEvent(msg("m1", ahp.RoleUser, text("p1", prompt)))); err != nil {
		t.Fatal(err)
	}
	b := transport.NewWorkBudget(probe.Spent() + probe.Spent()/2) // one scan fits, two do not
	ctx := transport.WithWorkBudget(context.Background(), b)
	for i, want := range []int{0, 1} {
		res, err := interceptWith(ctx, p, requestEvent(msg("m1", ahp.RoleUser, text("p1", prompt))))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Effects) != want || want == 1 && res.Effects[0].Code != WorkBudgetCode {
			t.Fatalf("scan %d: effects %s", i+1, describeEffects(res))
		}
	}
}

// cancelAfter is a context whose Err turns to Canceled after n calls: a deadline that
// passes while the policy scans, at a point the test controls without a clock.
type cancelAfter struct {
	context.Context
	n     int64
	calls atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.calls.Add(1) > c.n {
		return context.Canceled
	}
	return nil
}

// TestPolicyStopsScanningAtItsDeadline: an in-process policy whose context ends while it
// scans returns at its next check with the context's error (which the chain reports as
// the timeout it is) instead of scanning the rest. Control: the same scan with a context
// that does not end makes many more checks.
func TestPolicyStopsScanningAtItsDeadline(t *testing.T) {
	for name, prompt := range craftedPrompts {
		t.Run(name, func(t *testing.T) {
			p := scanningPolicy(t, name)
			ev := requestEvent(msg("m1", ahp.RoleUser, text("p1", prompt[:len(prompt)/controlFraction[name]])))
			// Control: a context that never ends is checked many times over this prompt.
			whole := &cancelAfter{Context: context.Background(), n: 1 << 62}
			if _, err := interceptWith(whole, p, ev); err != nil {
				t.Fatal(err)
			}
			if whole.calls.Load() < 20 {
				t.Fatalf("control: only %d checks over the prompt", whole.calls.Load())
			}
			// A policy of its own: the one above keeps the prompt's result (scan_cache.go),
			// and a reused result is not scanned again.
			p = scanningPolicy(t, name)
			ctx := &cancelAfter{Context: context.Background(), n: 5}
			b := transport.NewWorkBudget(1 << 62)
			_, err := interceptWith(transport.WithWorkBudget(ctx, b), p, ev)
			if err != context.Canceled {
				t.Fatalf("err = %v, want the context's error", err)
			}
			if got := ctx.calls.Load(); got != 6 {
				t.Errorf("the scan went on after its context ended: %d checks, want 6", got)
			}
		})
	}
}

// TestToolsStopsAtItsDeadline: the tools policy, which runs on the caller's goroutine
// (transport.BoundedPolicy), looks at its context while it evaluates a long script and
// stops at the first look after the context ended, answering with the context's error —
// never with a verdict over the part it evaluated, which here would have let through the
// rm -rf / at the end. Control: with a context that does not end it looks many times and
// finds the rm.
func TestToolsStopsAtItsDeadline(t *testing.T) {
	p, err := NewTools(ToolsConfig{Destructive: true})
	if err != nil {
		t.Fatal(err)
	}
	ev := toolBeforeEvent("Bash", string(mustJSON(map[string]string{"command": strings.Repeat("echo a; ", 4000) + "rm -rf /"})))
	whole := &cancelAfter{Context: context.Background(), n: 1 << 62}
	r, err := interceptWith(whole, p, ev)
	if err != nil || len(r.Effects) == 0 || r.Effects[0].Type != ahp.EffectDeny {
		t.Fatalf("control: %+v %v, want the rm -rf / denied", r, err)
	}
	if whole.calls.Load() < 20 {
		t.Fatalf("control: only %d looks at the context over 4000 statements", whole.calls.Load())
	}
	ctx := &cancelAfter{Context: context.Background(), n: 5}
	r, err = interceptWith(ctx, p, ev)
	if err != context.Canceled || r != nil {
		t.Fatalf("got %+v, %v; want no result and the context's error", r, err)
	}
	// The sixth look ends the evaluation; the rules' loop and Intercept look once more
	// each on the way out.
	if got := ctx.calls.Load(); got != 8 {
		t.Errorf("the evaluation went on after its context ended: %d looks, want 8", got)
	}
	// Each nested script is looked at before it is parsed, not every 16 statements: 40
	// bash -c scripts give the control 40 looks or more, and the evaluation still stops at
	// the sixth.
	ev = toolBeforeEvent("Bash", string(mustJSON(map[string]string{"command": strings.Repeat("bash -c 'echo a'; ", 40) + "rm -rf /"})))
	whole = &cancelAfter{Context: context.Background(), n: 1 << 62}
	if r, err := interceptWith(whole, p, ev); err != nil || len(r.Effects) == 0 || whole.calls.Load() < 40 {
		t.Fatalf("control: %+v %v after %d looks", r, err, whole.calls.Load())
	}
	ctx = &cancelAfter{Context: context.Background(), n: 5}
	if r, err := interceptWith(ctx, p, ev); err != context.Canceled || r != nil || ctx.calls.Load() != 8 {
		t.Fatalf("nested scripts: %+v, %v after %d looks; want the context's error after 8", r, err, ctx.calls.Load())
	}
	var _ transport.BoundedPolicy = p
}
