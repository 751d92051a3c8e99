package pinning

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// FileVersion is the version of the pins file format.
const FileVersion = 1

// File is the pins file: what `hookproxy pins export` writes and pinning.mode file reads.
// It holds pins only (never a pending definition), one list per scope, sorted, so that a
// diff of two exports shows what an operator accepted.
type File struct {
	Version int                  `json:"version"`
	Scopes  map[string][]FilePin `json:"scopes"`
}

// FilePin is one pinned tool of a File.
type FilePin struct {
	Name        string `json:"name"`
	Digest      string `json:"digest"`
	Description string `json:"description,omitempty"` // for the reviewer; the digest decides
}

// Export returns the pins of every scope as a File.
func (p *Pinner) Export(ctx context.Context) (*File, error) {
	scopes, err := p.List(ctx)
	if err != nil {
		return nil, err
	}
	f := &File{Version: FileVersion, Scopes: map[string][]FilePin{}}
	for _, s := range scopes {
		for _, e := range s.Tools {
			if e.Digest != "" {
				f.Scopes[s.Scope] = append(f.Scopes[s.Scope], FilePin{Name: e.Name, Digest: e.Digest, Description: e.Description})
			}
		}
	}
	return f, nil
}

// Encode writes f as indented JSON.
func (f *File) Encode() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(f)
	return buf.Bytes()
}

// ParseFile reads a pins file and checks it.
func ParseFile(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("pins file: %w", err)
	}
	if f.Version != FileVersion {
		return nil, fmt.Errorf("pins file: version %d is not %d", f.Version, FileVersion)
	}
	for scope, pins := range f.Scopes {
		seen := map[string]bool{}
		for i, pin := range pins {
			switch {
			case pin.Name == "":
				return nil, fmt.Errorf("pins file: scopes[%q][%d]: name is empty", scope, i)
			case seen[pin.Name]:
				return nil, fmt.Errorf("pins file: scopes[%q][%d]: tool %q is pinned twice", scope, i, pin.Name)
			case !strings.HasPrefix(pin.Digest, DigestPrefix) || len(pin.Digest) != len(DigestPrefix)+64:
				return nil, fmt.Errorf("pins file: scopes[%q][%d]: digest %q is not %s followed by 64 hex digits", scope, i, pin.Digest, DigestPrefix)
			}
			seen[pin.Name] = true
		}
	}
	return &f, nil
}

// ReadFile reads and checks the pins file at path.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pins file: %w", err)
	}
	return ParseFile(data)
}

// Install makes f's pins the store's pins (file mode, at start): each pin replaces the
// store's entry of that name unless the store already pins the same digest.
func (p *Pinner) Install(ctx context.Context, f *File) error {
	for scope, pins := range f.Scopes {
		have, err := p.store.Load(ctx, scope)
		if err != nil {
			return err
		}
		var put []Entry
		for _, pin := range pins {
			if e, ok := have[pin.Name]; ok && e.Digest == pin.Digest {
				continue
			}
			put = append(put, Entry{Name: pin.Name, Digest: pin.Digest, Description: pin.Description, PinnedAt: p.now().UTC()})
		}
		if len(put) > 0 {
			if err := p.store.Put(ctx, scope, put); err != nil {
				return err
			}
		}
	}
	return nil
}
