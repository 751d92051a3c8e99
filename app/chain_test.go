package app

import (
	"testing"

	"go.uber.org/zap"

	"github.com/hookproxy/hookproxy/chain"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/policies"
)

// TestBuildChainSuppliesTheObserveTimeout: the engine takes its observation bound from
// the assembly, which gives limits.observeTimeout or, for a configuration built in code
// without limits, config's default. The control is the same registration handed to
// chain.New without a bound: refused, so the bound BuildChain passed is the assembly's.
func TestBuildChainSuppliesTheObserveTimeout(t *testing.T) {
	cfg := config.Default()
	cfg.Limits = config.Limits{} // built in code: no defaults applied
	ch, err := BuildChain(cfg, "", zap.NewNop())
	if err != nil {
		t.Fatalf("BuildChain with zero limits: %v", err)
	}
	if ch == nil {
		t.Fatal("BuildChain returned no chain for the default registration")
	}
	_ = ch.Close()

	doc, _, err := LoadRegistration(cfg)
	if err != nil || doc == nil {
		t.Fatalf("LoadRegistration: %v", err)
	}
	if bare, err := chain.New(doc, chain.Options{Source: cfg.Source, Policies: policies.Factories()}); err == nil {
		_ = bare.Close()
		t.Fatal("chain.New without a bound succeeded; the assembly's bound is not what made BuildChain work")
	}
}
