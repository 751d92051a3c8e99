package app

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookproxy/hookproxy/config"
	"github.com/hookproxy/hookproxy/internal/testsupport"
)

// TestLogFormats: auto is console lines on a terminal and JSON lines (ISO 8601 time)
// elsewhere; json and console force one; neither carries a stack trace, even at error.
func TestLogFormats(t *testing.T) {
	for _, tc := range []struct {
		format   string
		terminal bool
		json     bool
	}{
		{"auto", true, false}, {"auto", false, true}, {"", false, true},
		{"json", true, true}, {"console", false, false},
	} {
		enc, err := encoder(tc.format, tc.terminal)
		if err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		var buf bytes.Buffer
		log := zap.New(zapcore.NewCore(enc, zapcore.AddSync(&buf), zapcore.DebugLevel))
		log.Error("cannot start", zap.String("listen", "127.0.0.1:8080"))
		line := buf.String()
		var rec map[string]any
		isJSON := json.Unmarshal([]byte(line), &rec) == nil
		if isJSON != tc.json {
			t.Errorf("format %q terminal %v: JSON = %v, want %v: %q", tc.format, tc.terminal, isJSON, tc.json, line)
		}
		if isJSON {
			if ts, _ := rec["ts"].(string); !strings.Contains(ts, "T") {
				t.Errorf("JSON ts = %v, want an ISO 8601 time", rec["ts"])
			}
		}
		if strings.Count(line, "\n") != 1 || strings.Contains(line, "stacktrace") || strings.Contains(line, ".go:") {
			t.Errorf("format %q: want one line without a stack trace or caller: %q", tc.format, line)
		}
	}
	if _, err := encoder("xml", false); err == nil {
		t.Error(`encoder("xml") accepted`)
	}
	// A writer that is not a file is not a terminal: auto writes JSON there.
	var buf bytes.Buffer
	l, err := NewWriterLogger(&buf, "auto", "info")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("x")
	if !json.Valid(bytes.TrimSpace(buf.Bytes())) {
		t.Errorf("auto on a buffer wrote %q, want JSON", buf.String())
	}
}

// TestOverrideSurvivesReload: serve's --listen and --admin (Options.Override) apply to every
// configuration a reload loads, so a reload neither reports them as changed settings nor
// loses them.
func TestOverrideSurvivesReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookproxy.yaml")
	writeFile(t, path, "listen: 127.0.0.1:1\nadmin: 127.0.0.1:2\nregistration: none\nroutes:\n  - {prefix: /a, api: passthrough, upstream: http://127.0.0.1:3}\n", 0o600)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	listen, adminAddr := testsupport.FreeAddr(t), testsupport.FreeAddr(t)
	var logs testsupport.LockedBuffer
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&logs), zapcore.DebugLevel))
	ctx, cancel := context.WithCancel(context.Background())
	reload := make(chan struct{}, 1)
	started := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Config: cfg, ConfigPath: path, Logger: logger, Reload: reload, ReloadDebounce: 50 * time.Millisecond,
			Override: func(c *config.Config) { c.Listen, c.Admin = listen, adminAddr },
			Started:  func(p, a string) { started <- [2]string{p, a} }})
	}()
	defer func() { cancel(); <-done }()
	select {
	case a := <-started:
		if a[0] != listen || a[1] != adminAddr {
			t.Fatalf("listening on %v, want %s and %s", a, listen, adminAddr)
		}
	case err := <-done:
		t.Fatalf("Run: %v\n%s", err, logs.String())
	case <-time.After(10 * time.Second):
		t.Fatal("did not start")
	}
	reload <- struct{}{}
	eventually(t, "the reload", func() bool { return strings.Contains(logs.String(), "configuration reloaded") })
	if strings.Contains(logs.String(), "takes effect only after a restart") {
		t.Errorf("the reload reported the flags' addresses as changed settings:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "NO POLICIES IN FORCE") {
		t.Errorf("registration: none was not warned about:\n%s", logs.String())
	}
}
