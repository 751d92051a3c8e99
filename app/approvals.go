package app

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"reflect"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/approvals"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/proxy"
	"github.com/hookproxy/hookproxy/state"
)

// openApprovals starts the approvals when the admin listener is on (the approval path:
// where people decide). Without it, nothing is started and ask is not advertised. The
// records live beside the conversation state: in memory, or on the same Redis, where any
// replica can decide a call another holds. Like the store, they are opened once and kept
// across reloads (approvals.timeout and notify take effect at a restart).
func (rt *Runtime) openApprovals(cfg *config.Config) error {
	if cfg.Admin == "" || rt.approvals != nil {
		return nil
	}
	var st approvals.Store = approvals.NewMemory()
	if r, ok := rt.store.(*state.Redis); ok {
		timeout := time.Duration(cfg.State.Redis.TimeoutMs) * time.Millisecond
		if timeout < time.Second {
			timeout = time.Second // a decision is rare; a slow Redis must not deny it
		}
		st = approvals.NewRedis(r.Client(), r.KeyPrefix(), timeout)
	}
	o := approvals.Options{Store: st, Timeout: cfg.Approvals.Timeout, LinkBase: cfg.ApprovalLinkBase(), Logger: rt.log.Named("approvals")}
	for _, n := range cfg.Approvals.Notify {
		o.Notify = append(o.Notify, approvals.Notify{URL: n.URL, Format: n.Format})
	}
	if rt.metrics != nil {
		o.Metrics = rt.metrics
	}
	svc, err := approvals.New(o)
	if err != nil {
		return err
	}
	rt.approvals = svc
	rt.log.Info("approvals on: tool calls a policy asks about wait for a decision on the admin listener",
		zap.Duration("timeout", cfg.Approvals.Timeout), zap.Int("notify", len(o.Notify)))
	return nil
}

// approvalRoutes mounts the approvals endpoints on the admin listener (nil without).
func (rt *Runtime) approvalRoutes() func(chi.Router) {
	if rt.approvals == nil {
		return nil
	}
	return rt.approvals.Routes
}

// policyGeneration names the policies that judged a call, for the approval digest: a hash
// of the registration document in force, the same on every replica that loads it. An
// approval asked under one registration is not an approval under another.
func policyGeneration(cfg *config.Config) string {
	doc := cfg.RegistrationInline
	if cfg.Registration != "" {
		if b, err := os.ReadFile(cfg.Registration); err == nil {
			doc = b
		}
	}
	h := sha256.Sum256(doc)
	return hex.EncodeToString(h[:8])
}

// proxyApprovals is the proxy's approval path (nil without one).
func proxyApprovals(svc *approvals.Service, cfg *config.Config) *proxy.Approvals {
	if svc == nil {
		return nil
	}
	return &proxy.Approvals{Service: svc, Generation: policyGeneration(cfg)}
}

// manifest is the served capability manifest: ask at tool.before when approvals are on.
func (rt *Runtime) manifest() *admin.CapabilityManifest {
	if rt.approvals == nil {
		return nil
	}
	m := admin.WithApprovals(admin.Manifest())
	return &m
}

// approvalRestartNotes warns that the admin tokens and the approvals settings, read at
// start, change only with a restart (like the admin address).
func approvalRestartNotes(old, cfg *config.Config, note func(key, from, to string)) {
	if !reflect.DeepEqual(old.AdminAuth.NamedTokens(), cfg.AdminAuth.NamedTokens()) {
		note("admin.token", "(running tokens)", "(configured tokens)")
	}
	if !reflect.DeepEqual(old.Approvals, cfg.Approvals) {
		note("approvals", old.Approvals.Timeout.String(), cfg.Approvals.Timeout.String())
	}
}
