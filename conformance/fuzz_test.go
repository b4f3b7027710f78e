package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseGroup: a corpus file of any bytes is read or refused, never a
// panic; what is read checks or is refused.
func FuzzParseGroup(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(corpusDir, "*.yaml"))
	for _, p := range files {
		if raw, err := os.ReadFile(p); err == nil && len(raw) < 4<<10 {
			f.Add(raw)
		}
	}
	f.Add([]byte("group: g\ntitle: t\nmatrix:\n  - case: {id: \"g/${v}\", title: t, steps: [{sleep: 1s}]}\n    rows: [{v: a}, {v: \"${v}\"}]\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		g, err := ParseGroup(raw)
		if err != nil {
			return
		}
		for _, c := range g.Cases {
			_ = c.check()
		}
	})
}
