package anthropic

import "github.com/hookproxy/hookproxy/mapping"

// DecodeFresh decodes body from the start, neither resuming nor remembering a decode.
func DecodeFresh(body []byte) (*mapping.Request, error) { return decodeFresh(body, false) }

// OnResume makes f hear the native message each later decode resumes at, until the
// returned function is called.
func OnResume(f func(at int)) (restore func()) {
	resumeHook = f
	return func() { resumeHook = nil }
}

// ForgetDecodes empties the memo of decodes.
func ForgetDecodes() {
	resumes.mu.Lock()
	defer resumes.mu.Unlock()
	resumes.cur, resumes.prev = map[uint64][]*snapshot{}, nil
	resumes.curBytes, resumes.prevBytes = 0, 0
	resumes.held.Store(0)
	resumes.entries.Store(0)
}

// ResumeMemoBytes is the memo's bound.
const ResumeMemoBytes = resumeMemoBytes

// WithResumeMemo replaces the memo with an empty one bounded by limit bytes until the
// returned function is called.
func WithResumeMemo(limit int64) (restore func()) {
	old := resumes
	resumes = newResumeMemo(limit)
	return func() { resumes = old }
}
