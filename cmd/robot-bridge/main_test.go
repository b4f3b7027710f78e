package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
)

// TestArchitectureDiagramIsCurrent fails when the lifecycle diagram in
// ARCHITECTURE.md no longer matches the fsm transition table; `make
// diagram` regenerates it.
func TestArchitectureDiagramIsCurrent(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "ARCHITECTURE.md"))
	require.NoError(t, err)
	want, err := fsm.ReplaceDiagram(string(doc))
	require.NoError(t, err)
	require.Equal(t, want, string(doc), "ARCHITECTURE.md's lifecycle diagram is stale: run `make diagram`")
}

func TestCheckConfig(t *testing.T) {
	good := filepath.Join("..", "..", "hw-configs", "sim-mobile-manipulator.yaml")
	base, err := os.ReadFile(good)
	require.NoError(t, err)

	tests := []struct {
		name     string
		edit     func(string) string
		wantCode int
		wantErr  []string
	}{
		{"shipped default", func(s string) string { return s }, 0, nil},
		{"unknown key", func(s string) string {
			return strings.Replace(s, "  id: sim-1\n", "  id: sim-1\n  colour: red\n", 1)
		}, 2, []string{"colour"}},
		{"joint min above max", func(s string) string {
			return strings.Replace(s, "{name: elbow,          min: -2.6, max: 2.6", "{name: elbow,          min: 2.7, max: 2.6", 1)
		}, 2, []string{"arm.joints[2]"}},
		{"missing safe pose", func(s string) string {
			return strings.Replace(s, "  arm: stowed\n  base: stop\n", "  base: stop\n", 1)
		}, 2, []string{"safe_pose.arm"}},
		{"negative timeout", func(s string) string {
			return strings.Replace(s, "state_timeout: 500ms", "state_timeout: -500ms", 1)
		}, 2, []string{"safety.state_timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a config file with one defect
			path := filepath.Join(t.TempDir(), "robot.yaml")
			edited := tc.edit(string(base))
			if tc.wantCode != 0 {
				require.NotEqual(t, string(base), edited, "the edit must change the file")
			}
			require.NoError(t, os.WriteFile(path, []byte(edited), 0o600))
			// When check-config reads it
			var out, errOut bytes.Buffer
			code := run([]string{"check-config", path}, &out, &errOut)
			// Then it fails naming the field
			require.Equal(t, tc.wantCode, code, "stdout=%s stderr=%s", out.String(), errOut.String())
			for _, w := range tc.wantErr {
				require.Contains(t, errOut.String(), w)
			}
		})
	}
}
