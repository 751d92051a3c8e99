package capture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Files lists the capture files of path: the file itself, or every *.jsonl file of a
// directory, in name order (which is time order for one writer).
func Files(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonl") {
			out = append(out, filepath.Join(path, e.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// Read calls fn for every line of the capture at path (a file or a directory), in order.
// A line that is not a capture line is an error naming its file and line number.
func Read(path string, fn func(*Line) error) error {
	files, err := Files(path)
	if err != nil {
		return err
	}
	for _, name := range files {
		if err := readFile(name, fn); err != nil {
			return err
		}
	}
	return nil
}

func readFile(name string, fn func(*Line) error) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for n := 1; ; n++ {
		// ReadBytes has no line length limit: lines are never truncated, so never refused.
		b, err := r.ReadBytes('\n')
		if len(b) > 0 && strings.TrimSpace(string(b)) != "" {
			var l Line
			if jerr := json.Unmarshal(b, &l); jerr != nil {
				return fmt.Errorf("%s:%d: not a capture line: %v", name, n, jerr)
			}
			if l.Version != Version || len(l.Event) == 0 || l.Boundary == "" {
				return fmt.Errorf("%s:%d: not a capture line (version %d, boundary %q)", name, n, l.Version, l.Boundary)
			}
			if ferr := fn(&l); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}
