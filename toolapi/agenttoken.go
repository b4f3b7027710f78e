package toolapi

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// ReadAgentToken reads the agent token for a client of the bridge
// (robot-bridge mcp-stdio, robot-agent): from file — the bridge's
// tokens.json (only its "agent" key is read) or a file holding the token
// alone, readable by its owner only, as the bridge refuses its own token
// file otherwise — or, with no file, from ROBOT_BRIDGE_AGENT_TOKEN through
// env. The errors name the flag (--token-file) and never the token.
func ReadAgentToken(file string, env func(string) string) (string, error) {
	if file == "" {
		tok := strings.TrimSpace(env(EnvAgentToken))
		if tok == "" {
			return "", fmt.Errorf("no agent token: pass --token-file (e.g. ./var/%s) or set %s", TokensFile, EnvAgentToken)
		}
		return tok, nil
	}
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s has mode %v; it must be readable by its owner only (chmod 600 %s)", file, fi.Mode().Perm(), file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	text := strings.TrimSpace(string(raw))
	if strings.HasPrefix(text, "{") {
		var t struct {
			Agent *string `json:"agent"`
		}
		if err := json.Unmarshal([]byte(text), &t); err != nil {
			return "", fmt.Errorf("--token-file %s is JSON but not a tokens file: %w", file, err)
		}
		if t.Agent == nil || strings.TrimSpace(*t.Agent) == "" {
			return "", fmt.Errorf("--token-file %s has no \"agent\" token", file)
		}
		return strings.TrimSpace(*t.Agent), nil
	}
	if text == "" || strings.ContainsAny(text, " \t\r\n") {
		return "", fmt.Errorf("--token-file %s must hold one token (or be the bridge's %s)", file, TokensFile)
	}
	return text, nil
}
