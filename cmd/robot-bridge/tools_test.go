package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// TestToolsCommand_PrintsWhatTheAPIServes: `robot-bridge tools` is what a
// developer pastes into a model API's request, so for every format it must
// be exactly what GET /v1/tools serves for the same hw-config.
func TestToolsCommand_PrintsWhatTheAPIServes(t *testing.T) {
	// Given the built binary and a bridge it serves on the shipped config
	bin := buildBinary(t)
	dataDir := t.TempDir()
	base := serveFresh(t, bin, dataDir)
	raw, err := os.ReadFile(filepath.Join(dataDir, toolapi.TokensFile))
	require.NoError(t, err)
	var tokens map[string]string
	require.NoError(t, json.Unmarshal(raw, &tokens))
	cfg, err := filepath.Abs(filepath.Join(repoRoot, "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)

	tests := []struct {
		name  string
		flags []string
		query string
	}{
		{"native", []string{"--format", "native"}, "?format=native"},
		{"default is native", nil, ""},
		{"openai", []string{"--format", "openai"}, "?format=openai"},
		{"openai strict", []string{"--format", "openai", "--strict"}, "?format=openai&strict=true"},
		{"anthropic", []string{"--format", "anthropic"}, "?format=anthropic"},
		{"gemini", []string{"--format", "gemini"}, "?format=gemini"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// When the command prints the tools, and the API lists them
			code, out, errOut := runBinary(t, bin, append([]string{"tools", "--config", cfg}, tc.flags...)...)
			require.Equal(t, 0, code, "stderr: %s", errOut)
			req, err := http.NewRequest(http.MethodGet, base+"/v1/tools"+tc.query, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+tokens["agent"])
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			served, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", served)

			// Then they are the same JSON
			require.JSONEq(t, string(served), out)
		})
	}

	t.Run("bad combinations are refused", func(t *testing.T) {
		for _, args := range [][]string{{"--format", "claude"}, {"--format", "anthropic", "--strict"}} {
			code, out, errOut := runBinary(t, bin, append([]string{"tools", "--config", cfg}, args...)...)
			require.Equal(t, 2, code, "%v: stdout %s", args, out)
			require.Empty(t, out)
			require.NotEmpty(t, errOut)
		}
	})
}
