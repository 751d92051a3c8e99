//go:build unix

package agents

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// writePNG writes a small picture (a gradient, so it is not trivially compressible) and
// returns its path.
func writePNG(t *testing.T, dir string) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := 0; x < 48; x++ {
		for y := 0; y < 32; y++ {
			img.Set(x, y, color.RGBA{R: uint8(x * 5), G: uint8(y * 7), B: 128, A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "diagram.png")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// imageSentBack returns the image blocks of the tool results of the request that got
// turn 2 (the one sent after Claude Code's Read of the picture), and whether such a
// request exists.
func imageSentBack(reqs []request) ([]gjson.Result, bool) {
	r, ok := requestWith(reqs, answerDestroy)
	if !ok {
		return nil, false
	}
	var images []gjson.Result
	for _, m := range gjson.Get(r.raw(), "messages").Array() {
		for _, b := range m.Get("content").Array() {
			if b.Get("type").String() != "tool_result" {
				continue
			}
			for _, c := range b.Get("content").Array() {
				if c.Get("type").String() == "image" {
					images = append(images, c)
				}
			}
		}
	}
	return images, true
}

// TestClaudeCodeImage: turn 1 of the scripted conversation is Claude Code's Read tool on
// a PNG file, which Claude Code answers with an image block inside the tool result. The
// next request then holds an image, the model's redacted_thinking and the prompt with its
// AWS key: the message list cannot be replaced whole, so the proxy must take the key out
// in place (hookproxy.redact_text) and the upstream answer 200, the image reaching it as
// the agent sent it. The control straight to the imitation shows Claude Code really sends
// the image and the key in that request.
func TestClaudeCodeImage(t *testing.T) {
	bin := agentBin(t, "claude")
	version := checkVersion(t, bin, claudePkg)

	setup := func(t *testing.T) (scratch, *imitation) {
		s := newScratch(t)
		sc := s.script(claudeDestroy)
		sc.readImage = writePNG(t, s.work)
		return s, newImitation(t, sc)
	}
	// The image data each run's upstream got, to compare the proxied with the control.
	var controlData string

	t.Run("control", func(t *testing.T) {
		s, im := setup(t)
		trap := newEgressTrap(t)
		res := runClaude(t, bin, im.URL, s, trap)
		saveRecord(t, version, res, im, trap)
		reqs := im.requests()
		if res.exitCode != 0 || res.timedOut {
			t.Errorf("control: agent exit code %d (timed out: %v), want 0", res.exitCode, res.timedOut)
		}
		images, ok := imageSentBack(reqs)
		if !ok {
			t.Fatalf("control: no request reached turn 2 (turns: %v)", turns(reqs))
		}
		if len(images) == 0 || images[0].Get("source.data").String() == "" {
			t.Fatalf("control: the request after the Read of the picture holds no image block in a tool result, so the proxied run does not exercise one")
		}
		controlData = images[0].Get("source.data").String()
		t.Logf("control: Claude Code sent the picture as %s, %d base64 characters", images[0].Get("source.media_type"), len(controlData))
		r, _ := requestWith(reqs, answerDestroy)
		if !strings.Contains(r.raw(), promptKeyID) {
			t.Errorf("control: the request carrying the image does not carry the prompt's key, so the proxied run does not redact beside an image")
		}
		if s.survived() {
			t.Errorf("control: the destructive command did not run, so the proxied check proves nothing")
		}
		if !answered(reqs, answerFinal) {
			t.Errorf("control: the conversation never reached its final turn (turns: %v)", turns(reqs))
		}
		checkNoEgress(t, trap)
	})

	t.Run("proxied", func(t *testing.T) {
		s, im := setup(t)
		trap := newEgressTrap(t)
		p := startProxy(t, im.URL, registration(t, s.victim))
		res := runClaude(t, bin, p.url+"/anthropic", s, trap)
		saveRecord(t, version, res, im, trap)
		// Completes, command refused, key redacted (not refused: turn 2 was reached).
		checkRefused(t, res, im, s, denyReason)
		images, ok := imageSentBack(im.requests())
		if !ok {
			return // checkRefused reported it
		}
		if len(images) == 0 {
			t.Fatalf("the upstream got the request after the Read of the picture without its image block")
		}
		if got := images[0].Get("source.data").String(); controlData != "" && got != controlData {
			t.Errorf("the image reached the upstream altered through the proxy (%d base64 characters, control %d)", len(got), len(controlData))
		}
		checkNoEgress(t, trap)
	})
}
