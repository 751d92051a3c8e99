package app

import (
	"context"
	"fmt"

	"github.com/go-chi/chi/v5"

	"github.com/hookproxy/hookproxy/admin"
	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/pinning"
	"github.com/hookproxy/hookproxy/state"
)

// newPinner builds the generation's tool-definition pinning from cfg.Pinning (nil when it
// is off). The pins live in the runtime's store, which outlives reloads: in the Redis of
// the conversation state when there is one (replicas share the pins), else in memory. In
// mode file the reviewed file is installed into the store at each load.
func (rt *Runtime) newPinner(cfg *config.Config) (*pinning.Pinner, error) {
	pc := cfg.Pinning
	if pc == nil {
		return nil, nil
	}
	if rt.pinStore == nil {
		if r, ok := rt.store.(*state.Redis); ok {
			rt.pinStore = r.Pins()
		} else {
			rt.pinStore = pinning.NewMemory()
		}
	}
	p, err := pinning.New(pinning.Options{Mode: pc.Mode, OnChange: pc.OnChange, OnPoison: pc.OnPoison, Store: rt.pinStore})
	if err != nil {
		return nil, err
	}
	if pc.Mode == config.PinningFile {
		f, err := pinning.ReadFile(pc.File)
		if err != nil {
			return nil, fmt.Errorf("pinning.file: %w", err)
		}
		if err := p.Install(context.Background(), f); err != nil {
			return nil, fmt.Errorf("pinning.file: installing the pins: %w", err)
		}
	}
	return p, nil
}

// Pinner is the current generation's tool-definition pinning, nil when it is off (the
// admin listener's /pins endpoints use it).
func (rt *Runtime) Pinner() *pinning.Pinner {
	if g := rt.cur.Load(); g != nil {
		return g.pins
	}
	return nil
}

// protectedRoutes mounts every endpoint of the admin listener that sits behind its
// authentication: the approvals (when on) and the pins.
func (rt *Runtime) protectedRoutes() func(chi.Router) {
	approvals, pins := rt.approvalRoutes(), admin.PinsRoutes(rt.Pinner)
	return func(r chi.Router) {
		if approvals != nil {
			approvals(r)
		}
		pins(r)
	}
}
