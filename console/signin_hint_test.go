package console

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// TestSignInHint_NamesTheKeyOfTokensJSONThatSignsIn checks the sign-in
// hint against the file the bridge really writes: the key it names in
// tokens.json must hold the token that opens a session.
func TestSignInHint_NamesTheKeyOfTokensJSONThatSignsIn(t *testing.T) {
	// Given a tokens.json generated as a first start of the bridge writes
	// it, and a console guarding that file's operator token
	dir := t.TempDir()
	tokens, created, err := toolapi.LoadOrCreateTokens(dir, func(string) string { return "" })
	require.NoError(t, err)
	require.True(t, created)
	raw, err := os.ReadFile(filepath.Join(dir, toolapi.TokensFile))
	require.NoError(t, err)
	var file map[string]string
	require.NoError(t, json.Unmarshal(raw, &file))
	f := newFixture(t, func(c *Conf) { c.OperatorToken = tokens.Operator })

	// When the sign-in page is served
	w := f.serve("GET", "/console/", "", nil)
	require.Equal(t, http.StatusOK, w.Code)
	hint := regexp.MustCompile(`(?s)<p class="hint" id="signin-hint">(.*?)</p>`).FindStringSubmatch(w.Body.String())
	require.NotNil(t, hint, "the sign-in hint is missing")

	// Then the key its hint names in tokens.json holds the token that signs in
	m := regexp.MustCompile(`<code>"(\w+)"</code> value in <code>` + regexp.QuoteMeta(toolapi.TokensFile) + `</code>`).FindStringSubmatch(hint[1])
	require.NotNil(t, m, "the hint must name the key of %s: %s", toolapi.TokensFile, hint[1])
	value, ok := file[m[1]]
	require.True(t, ok, "tokens.json has no key %q: %s", m[1], raw)
	signIn := f.serve("POST", "/console/api/session", `{"token":"`+value+`"}`, nil)
	require.Equal(t, http.StatusOK, signIn.Code, "the value of %q does not sign in: %s", m[1], signIn.Body.String())
	// And it names the variable that overrides the file
	require.Contains(t, hint[1], "<code>"+toolapi.EnvOperatorToken+"</code>")
}
