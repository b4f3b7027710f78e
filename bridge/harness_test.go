package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
)

// harnessFactory boots a bridge with a config edit; scenarios take one so
// they run unchanged over every transport (in-process here; ROS and MQTT
// variants live beside their transports' tests).
type harnessFactory func(t *testing.T, edit func(*hwconfig.Config)) *harness

// harness is one bridge booted in-process on a free loopback port with a
// temporary data dir, driving the bundled simulator, spoken to over real
// HTTP.
type harness struct {
	t *testing.T
	b *Bridge
	// sim is the simulated robot wherever it runs: in-process behind the
	// inproc driver, or as a ROS/MQTT node the bridge reaches over the
	// wire. Scenarios inject faults into it and read its ground truth.
	sim      *sim.Sim
	base     string
	agent    string
	operator string
	client   *http.Client
}

// testConfig loads the shipped default config and applies edits.
func testConfig(t *testing.T, edit func(*hwconfig.Config)) *hwconfig.Config {
	t.Helper()
	cfg, err := hwconfig.Load(filepath.Join("..", "hw-configs", "sim-mobile-manipulator.yaml"))
	require.NoError(t, err)
	// Keep the tests quick: fewer spurious detections, tighter monitors.
	cfg.Sim.FalsePositiveRate = 0
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	return cfg
}

// The test tokens every in-process bridge of these tests uses.
const (
	testAgentTok    = "agent-token-for-tests-0123456789"
	testOperatorTok = "operator-token-for-tests-0123456789"
)

// newTestBridge starts a bridge on cfg with the test tokens (and any extra
// environment) in a temporary data dir, and stops it when the test or
// benchmark ends.
func newTestBridge(tb testing.TB, cfg *hwconfig.Config, extraEnv map[string]string) *Bridge {
	tb.Helper()
	b, err := New(Conf{
		Config:  cfg,
		Listen:  "127.0.0.1:0",
		DataDir: tb.TempDir(),
		Env: func(k string) string {
			switch k {
			case "ROBOT_BRIDGE_AGENT_TOKEN":
				return testAgentTok
			case "ROBOT_BRIDGE_OPERATOR_TOKEN":
				return testOperatorTok
			}
			return extraEnv[k]
		},
	})
	require.NoError(tb, err)
	require.NoError(tb, b.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(tb, b.Stop(ctx))
	})
	return b
}

func startHarness(t *testing.T, edit func(*hwconfig.Config)) *harness {
	t.Helper()
	b := newTestBridge(t, testConfig(t, edit), nil)
	h := &harness{
		t: t, b: b, sim: b.Sim(), base: "http://" + b.Addr(),
		agent: testAgentTok, operator: testOperatorTok,
		client: &http.Client{Timeout: 90 * time.Second},
	}
	h.waitReady()
	return h
}

func (h *harness) waitReady() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		code, _ := h.do("GET", "/readyz", "", nil)
		if code == http.StatusOK {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatal("bridge never became ready")
}

// do sends a request with the given token ("" for none) and returns the
// status code and decoded JSON body.
func (h *harness) do(method, path, token string, body any) (int, map[string]any) {
	h.t.Helper()
	code, out, err := h.tryDo(method, path, token, body)
	require.NoError(h.t, err)
	return code, out
}

// tryDo is do without require, for goroutines a test spawns: it returns
// what went wrong instead of failing the test.
func (h *harness) tryDo(method, path, token string, body any) (int, map[string]any, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	out := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out); err != nil {
			return 0, nil, fmt.Errorf("body %s: %w", raw, err)
		}
	} else {
		out["_raw"] = string(raw)
	}
	return resp.StatusCode, out, nil
}

// call invokes a tool as the agent and returns the envelope.
func (h *harness) call(tool string, body map[string]any) map[string]any {
	h.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	code, env := h.do("POST", "/v1/tools/"+tool+"/call", h.agent, body)
	require.Equal(h.t, http.StatusOK, code, "envelope: %v", env)
	return env
}

// args wraps tool arguments in a call body.
func args(a map[string]any, extra ...any) map[string]any {
	body := map[string]any{"arguments": a}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return body
}

// errType returns the envelope's error type, "" when ok.
func errType(env map[string]any) string {
	e, _ := env["error"].(map[string]any)
	if e == nil {
		return ""
	}
	s, _ := e["type"].(string)
	return s
}

func taskID(t *testing.T, env map[string]any) string {
	t.Helper()
	task, ok := env["task"].(map[string]any)
	require.True(t, ok, "envelope has no task: %v", env)
	id, _ := task["id"].(string)
	require.NotEmpty(t, id)
	return id
}

// pendingApproval waits for the approval request of a task and returns its id.
func (h *harness) pendingApproval(task string) string {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		code, body := h.do("GET", "/v1/approvals?status=pending", h.operator, nil)
		require.Equal(h.t, http.StatusOK, code, "%v", body)
		list, _ := body["approvals"].([]any)
		for _, a := range list {
			m := a.(map[string]any)
			if m["task_id"] == task {
				return m["id"].(string)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("no pending approval for task %s", task)
	return ""
}

func (h *harness) approve(task string) {
	h.t.Helper()
	id := h.pendingApproval(task)
	code, body := h.do("POST", "/v1/approvals/"+id+"/approve", h.operator, map[string]any{})
	require.Equal(h.t, http.StatusOK, code, "%v", body)
}

// waitTask long-polls a task until it is terminal and returns get_task's envelope.
func (h *harness) waitTask(id string, max time.Duration) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(max)
	for {
		env := h.call("get_task", args(map[string]any{"task_id": id, "wait_ms": 5000}))
		data, _ := env["data"].(map[string]any)
		if data != nil && isTerminal(fmt.Sprint(data["status"])) {
			return env
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s not terminal after %s: %v", id, max, env)
		}
	}
}

func isTerminal(s string) bool {
	switch s {
	case "succeeded", "denied", "expired", "cancelled", "failed", "recovered", "fault", "estopped", "interrupted":
		return true
	}
	return false
}

func taskData(env map[string]any) map[string]any {
	d, _ := env["data"].(map[string]any)
	return d
}
