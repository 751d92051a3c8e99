package config

import (
	"os"
	"path/filepath"
)

// Pinning turns on tool-definition pinning (package pinning): what an agent is shown of
// each tool on MCP routes (tools/list) and model routes (the request's tools) is pinned,
// and later changes and poisoned descriptions are reported and acted on. Off unless the
// block is present.
type Pinning struct {
	// Mode is "tofu" (default: the first definition seen is pinned) or "file" (pins come
	// from File, written by `hookproxy pins export` and reviewed like code).
	Mode string `yaml:"mode" json:"mode"`
	// File is the pins file of mode file (absolute, or relative to this configuration).
	File string `yaml:"file" json:"file"`
	// OnChange says what a changed, renamed or confusable tool (and, in file mode, one
	// not in the file) does: "warn" (default: audit and count), "strip" (taken out of the
	// list the agent receives, its calls refused), "deny" (its calls are refused at
	// tool.before) or "ask" (its calls wait for a person's approval; needs the admin
	// listener, where approvals are decided).
	OnChange string `yaml:"onChange" json:"onChange"`
	// OnPoison says what a description with instructions for the model or hidden text
	// does: "warn" (default), "strip" or "deny".
	OnPoison string `yaml:"onPoison" json:"onPoison"`
}

// Values of Pinning fields.
const (
	PinningTOFU  = "tofu"
	PinningFile  = "file"
	PinningWarn  = "warn"
	PinningStrip = "strip"
	PinningDeny  = "deny"
	PinningAsk   = "ask"
)

// applyPinningDefaults fills the pinning block's defaults when it is present.
func applyPinningDefaults(p *Pinning) {
	if p == nil {
		return
	}
	if p.Mode == "" {
		p.Mode = PinningTOFU
	}
	if p.OnChange == "" {
		p.OnChange = PinningWarn
	}
	if p.OnPoison == "" {
		p.OnPoison = PinningWarn
	}
}

// validatePinning checks the pinning block.
func validatePinning(p *Pinning, admin string, add func(key, format string, args ...any)) {
	if p == nil {
		return
	}
	switch p.Mode {
	case PinningTOFU:
		if p.File != "" {
			add("pinning.file", "is read in mode file only (mode is tofu)")
		}
	case PinningFile:
		if p.File == "" {
			add("pinning.file", "is required with mode file (write one with `hookproxy pins export`)")
		} else if _, err := os.Stat(p.File); err != nil {
			add("pinning.file", "%v", err)
		}
	default:
		add("pinning.mode", "%q is not tofu or file", p.Mode)
	}
	switch p.OnChange {
	case PinningWarn, PinningStrip, PinningDeny:
	case PinningAsk:
		if admin == "" {
			// Approvals exist with the admin listener only: it is where people decide.
			add("pinning.onChange", "\"ask\" holds calls for approval, which needs the admin listener (admin:); without it use warn, strip or deny")
		}
	default:
		add("pinning.onChange", "%q is not warn, strip, deny or ask", p.OnChange)
	}
	switch p.OnPoison {
	case PinningWarn, PinningStrip, PinningDeny:
	default:
		add("pinning.onPoison", "%q is not warn, strip or deny", p.OnPoison)
	}
}

// resolvePinningFile makes a relative pins file relative to the configuration's directory.
func resolvePinningFile(p *Pinning, baseDir string) {
	if p != nil && p.File != "" && !filepath.IsAbs(p.File) {
		p.File = filepath.Join(baseDir, p.File)
	}
}
