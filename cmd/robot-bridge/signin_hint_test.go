package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolapi"
)

// serveFresh starts the built binary's serve on a free loopback port with
// an empty data dir and no token variables, as on a first start, and
// returns its base URL. The process gets SIGINT when the test ends.
func serveFresh(t *testing.T, bin, dataDir string) string {
	t.Helper()
	cfg, err := filepath.Abs(filepath.Join(repoRoot, "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROBOT_BRIDGE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := addrRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-exited:
		t.Fatalf("robot-bridge serve exited at start: %s", errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("robot-bridge serve did not announce its address: %s", errOut.String())
	}
	return ""
}

// TestConsoleSignInHint_NamesTheKeyOfTokensJSONThatSignsIn checks the
// console's sign-in hint against the tokens.json a first start of serve
// really writes: the key the hint names must hold the token that opens a
// console session.
func TestConsoleSignInHint_NamesTheKeyOfTokensJSONThatSignsIn(t *testing.T) {
	// Given a bridge started for the first time, which generated tokens.json
	bin := buildBinary(t)
	dataDir := t.TempDir()
	base := serveFresh(t, bin, dataDir)
	raw, err := os.ReadFile(filepath.Join(dataDir, toolapi.TokensFile))
	require.NoError(t, err)
	var file map[string]string
	require.NoError(t, json.Unmarshal(raw, &file))

	// When the console's sign-in page is fetched
	resp, err := http.Get(base + "/console/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	hint := regexp.MustCompile(`(?s)<p class="hint" id="signin-hint">(.*?)</p>`).FindSubmatch(page)
	require.NotNil(t, hint, "the sign-in hint is missing from the console page")

	// Then the key it names in tokens.json holds the token that signs in
	m := regexp.MustCompile(`<code>"(\w+)"</code> value in <code>` + regexp.QuoteMeta(toolapi.TokensFile) + `</code>`).FindSubmatch(hint[1])
	require.NotNil(t, m, "the hint must name the key of %s: %s", toolapi.TokensFile, hint[1])
	value, ok := file[string(m[1])]
	require.True(t, ok, "tokens.json has no key %q: %s", m[1], raw)
	body, err := json.Marshal(map[string]string{"token": value})
	require.NoError(t, err)
	signIn, err := http.Post(base+"/console/api/session", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	answer, err := io.ReadAll(signIn.Body)
	require.NoError(t, err)
	require.NoError(t, signIn.Body.Close())
	require.Equal(t, http.StatusOK, signIn.StatusCode, "the value of %q does not sign in: %s", m[1], answer)
	// And it names the variable that overrides the file
	require.Contains(t, string(hint[1]), "<code>"+toolapi.EnvOperatorToken+"</code>")
}
