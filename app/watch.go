package app

import (
	"path/filepath"
	"slices"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// fileWatcher reports changes of a few files. It watches their directories rather than
// the files: editors and deployment tools replace a file by renaming a new one over it,
// which ends a watch on the file itself. Kubernetes ConfigMap volumes swap a "..data"
// symlink instead; events on that name count as well.
type fileWatcher struct {
	w     *fsnotify.Watcher
	log   *zap.Logger
	dirs  []string
	names map[string]bool // cleaned absolute paths of interest
}

func newFileWatcher(log *zap.Logger) (*fileWatcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &fileWatcher{w: w, log: log, names: map[string]bool{}}, nil
}

// set replaces the watched files.
func (fw *fileWatcher) set(paths []string) {
	names := map[string]bool{}
	var dirs []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		names[abs] = true
		d := filepath.Dir(abs)
		names[filepath.Join(d, "..data")] = true
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	for _, d := range fw.dirs {
		if !slices.Contains(dirs, d) {
			_ = fw.w.Remove(d)
		}
	}
	for _, d := range dirs {
		if !slices.Contains(fw.dirs, d) {
			if err := fw.w.Add(d); err != nil {
				fw.log.Warn("cannot watch a configuration directory; reload with SIGHUP instead",
					zap.String("dir", d), zap.Error(err))
			}
		}
	}
	fw.dirs, fw.names = dirs, names
}

// relevant reports whether ev concerns a watched file. Chmod alone changes no content.
func (fw *fileWatcher) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	abs, err := filepath.Abs(ev.Name)
	return err == nil && fw.names[abs]
}

func (fw *fileWatcher) close() { _ = fw.w.Close() }
