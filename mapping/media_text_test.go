package mapping

import "testing"

func TestTextualMediaType(t *testing.T) {
	for mt, want := range map[string]bool{
		"text/plain": true, "TEXT/CSV; charset=utf-8": true, "application/json": true,
		"application/vnd.api+json": true, "application/xml": true, "image/svg+xml": true,
		"application/x-yaml": true, "application/x-python": true, "application/javascript": true,
		"application/pdf": false, "image/png": false, "application/octet-stream": false,
		"audio/wav": false, "": false, "json": false, "application/": false,
	} {
		if got := TextualMediaType(mt); got != want {
			t.Errorf("TextualMediaType(%q) = %v, want %v", mt, got, want)
		}
	}
}
