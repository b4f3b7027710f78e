package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/bridge"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
)

const (
	agentTok    = "agent-token-for-cmd-tests-0123456789"
	operatorTok = "operator-token-for-cmd-tests-0123456789"
	apiKey      = "sk-test-secret-key-never-printed-0123"
)

// startBridge boots the real bridge on the simulator and returns its URL.
func startBridge(t *testing.T) string {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	cfg.Sim.FalsePositiveRate = 0
	b, err := bridge.New(bridge.Conf{
		Config: cfg, Listen: "127.0.0.1:0", DataDir: t.TempDir(),
		Env: func(k string) string {
			return map[string]string{"ROBOT_BRIDGE_AGENT_TOKEN": agentTok, "ROBOT_BRIDGE_OPERATOR_TOKEN": operatorTok}[k]
		},
	})
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, b.Stop(ctx))
	})
	return "http://" + b.Addr()
}

// model is a scripted OpenAI-compatible server: it answers a
// get_robot_state call first, then keeps answering with text; it
// records the Authorization headers it got.
type model struct {
	mu    sync.Mutex
	auths []string
	n     int
	// loop, when set, makes every answer a tool call.
	loop bool
}

func (m *model) start(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.auths = append(m.auths, r.Header.Get("Authorization"))
		m.n++
		n := m.n
		m.mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": "The robot is standing still at the start."}
		if n == 1 || m.loop {
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_" + string(rune('a'+n)), "type": "function",
				"function": map[string]any{"name": "get_robot_state", "arguments": "{}"},
			}}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func runCmd(env map[string]string, stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func TestHelp(t *testing.T) {
	code, out, _ := runCmd(nil, "", "--help")
	require.Equal(t, exitOK, code)
	for _, want := range []string{"robot-agent chat [flags]", "robot-agent run [flags] PROMPT", "-bridge URL", "-token-file FILE", "-backend", "-max-iterations", "-turn-timeout", "OPENAI_API_KEY"} {
		require.Contains(t, out, want)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no command", nil, nil, "name a command: chat or run"},
		{"unknown command", []string{"fly"}, nil, `unknown command "fly"; allowed: chat, run`},
		{"run without a prompt", []string{"run"}, nil, "give the request as one argument"},
		{"chat with arguments", []string{"chat", "hello"}, nil, "takes no arguments"},
		{"no token", []string{"run", "--model", "m", "hi"}, nil, "no agent token: pass --token-file"},
		{"no model", []string{"run", "hi"}, map[string]string{"ROBOT_BRIDGE_AGENT_TOKEN": "x"}, "--model is required"},
		{"bad backend", []string{"run", "--model", "m", "--backend", "gemini", "hi"}, map[string]string{"ROBOT_BRIDGE_AGENT_TOKEN": "x"}, `--backend "gemini" is not a backend; allowed: openai, anthropic`},
		{"bad limit", []string{"run", "--model", "m", "--max-result-bytes", "10", "hi"}, map[string]string{"ROBOT_BRIDGE_AGENT_TOKEN": "x"}, "Limits.MaxResultBytes is 10; it must be at least 512"},
		{"bad bridge", []string{"run", "--model", "m", "--bridge", "ftp://x", "hi"}, map[string]string{"ROBOT_BRIDGE_AGENT_TOKEN": "x"}, `BridgeURL "ftp://x" is not an http(s) URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCmd(tc.env, "", tc.args...)
			require.Equal(t, exitUsage, code, errOut)
			require.Contains(t, errOut, tc.want)
		})
	}
}

func TestRun_AnswersAndNeverShowsTheKey(t *testing.T) {
	// Given a bridge, a scripted model and the agent token in a file
	base := startBridge(t)
	m := &model{}
	modelURL := m.start(t)
	tokFile := filepath.Join(t.TempDir(), "tokens.json")
	require.NoError(t, os.WriteFile(tokFile, []byte(`{"agent": "`+agentTok+`", "operator": "x"}`), 0o600))
	env := map[string]string{"OPENAI_API_KEY": apiKey, "OPENAI_BASE_URL": modelURL, "ROBOT_AGENT_BRIDGE_URL": base}
	// When robot-agent run asks where the robot is
	code, out, errOut := runCmd(env, "", "run", "--verbose", "--model", "scripted", "--token-file", tokFile, "where is the robot?")
	// Then it shows the tool call and the answer, exits 0, sent the key
	// to the model only, and never printed it
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "-> get_robot_state {}\n   ok get_robot_state: The robot is stopped at (0.00, 0.00)")
	require.True(t, strings.HasSuffix(out, "The robot is standing still at the start.\n"), out)
	require.Equal(t, []string{"Bearer " + apiKey, "Bearer " + apiKey}, m.auths)
	require.NotContains(t, out+errOut, apiKey)
	require.NotContains(t, out+errOut, agentTok)
}

func TestRun_LimitEndsTheTurnWithExit3(t *testing.T) {
	base := startBridge(t)
	m := &model{loop: true}
	env := map[string]string{"OPENAI_BASE_URL": m.start(t), "ROBOT_BRIDGE_AGENT_TOKEN": agentTok}
	code, out, errOut := runCmd(env, "", "run", "--bridge", base, "--model", "scripted", "--max-iterations", "2", "watch the robot")
	require.Equal(t, exitLimit, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "I stopped after 2 steps without finishing, the most I take for one request.\nWhat worked:\n- get_robot_state: The robot is stopped at ")
}

func TestChat_ReadsRequestsUntilExit(t *testing.T) {
	base := startBridge(t)
	m := &model{}
	env := map[string]string{"OPENAI_BASE_URL": m.start(t), "ROBOT_BRIDGE_AGENT_TOKEN": agentTok}
	code, out, errOut := runCmd(env, "where is it?\n\nand now?\nexit\nnever read\n", "chat", "--bridge", base, "--model", "scripted")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "robot-agent: session robot-agent-")
	require.Equal(t, 2, strings.Count(out, "The robot is standing still at the start.\n"), out)
	require.Equal(t, 2, strings.Count(out, "(answered, "), out)
	require.Equal(t, 3, m.n, "one tool call, then an answer each turn")
}
