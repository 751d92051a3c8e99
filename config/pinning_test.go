package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPinningBlock(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pins.json"), []byte(`{"version":1,"scopes":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := "routes: [{prefix: /mcp, api: mcp, upstream: http://127.0.0.1:7000/mcp}]\n"

	cfg, err := Parse([]byte(base), dir)
	if err != nil || cfg.Pinning != nil {
		t.Fatalf("without the block pinning must be off: %+v %v", cfg.Pinning, err)
	}
	cfg, err = Parse([]byte(base+"pinning: {}\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pinning; p == nil || p.Mode != "tofu" || p.OnChange != "warn" || p.OnPoison != "warn" {
		t.Fatalf("defaults: %+v", p)
	}
	cfg, err = Parse([]byte(base+"pinning: {mode: file, file: pins.json, onChange: deny, onPoison: strip}\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pinning.File != filepath.Join(dir, "pins.json") {
		t.Fatalf("file not resolved against the configuration: %q", cfg.Pinning.File)
	}
	if _, err := Parse([]byte(base+"admin: 127.0.0.1:9099\npinning: {onChange: ask}\n"), dir); err != nil {
		t.Fatalf("ask with the admin listener: %v", err)
	}
	for doc, want := range map[string]string{
		"pinning: {onChange: ask}":               `pinning.onChange: "ask" holds calls for approval, which needs the admin listener`,
		"pinning: {onPoison: block}":             `pinning.onPoison: "block" is not warn, strip or deny`,
		"pinning: {mode: file}":                  "pinning.file: is required with mode file",
		"pinning: {mode: file, file: nope.json}": "pinning.file:",
		"pinning: {mode: always}":                `pinning.mode: "always" is not tofu or file`,
		"pinning: {onChnage: deny}":              "pinning.onChnage: unknown key",
	} {
		_, err := Parse([]byte(base+doc+"\n"), dir)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", doc, err, want)
		}
	}
}
