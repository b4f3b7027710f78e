package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// mcpSDKDir holds the TypeScript SDK client script and its pinned
// node_modules (installed by `make test-deps`, scripts/test-npm.sh).
var mcpSDKDir = filepath.Join("..", "testdata", "mcp")

// requireMCPSDK fails the test, saying how to install it, unless Node.js
// and the pinned @modelcontextprotocol/sdk are installed.
func requireMCPSDK(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "Node.js is not installed: install it (apt-get install nodejs npm), then run `make test-deps`")
	raw, err := os.ReadFile(filepath.Join(mcpSDKDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	require.NoError(t, err, "the MCP TypeScript SDK is not installed in testdata/mcp/node_modules: run `make test-deps` (npm ci in testdata/mcp)")
	var pkg, want struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(raw, &pkg))
	manifest, err := os.ReadFile(filepath.Join(mcpSDKDir, "package.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(manifest, &want))
	require.Equal(t, want.Dependencies["@modelcontextprotocol/sdk"], pkg.Version,
		"testdata/mcp/node_modules holds another SDK version than package.json pins: run `make test-deps`")
	return node
}

// sdkStep is one JSON line the script printed.
type sdkStep map[string]any

func (s sdkStep) m(key string) sdkStep {
	v, _ := s[key].(map[string]any)
	return v
}

// TestE2E_MCPTypeScriptSDK is the Done-when line of issue 12: the official
// MCP TypeScript SDK, as a host runs it, against a real bridge on the
// in-process simulator over loopback HTTP.
func TestE2E_MCPTypeScriptSDK(t *testing.T) {
	node := requireMCPSDK(t)
	// Given a running bridge and the SDK client script
	h := startHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = mcpSDKDir
	cmd.Env = append(os.Environ(), "ROBOT_BRIDGE_MCP_URL="+h.base+"/mcp", "ROBOT_BRIDGE_TOKEN="+h.agent)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	// When the script runs, the operator approves its motion as soon as
	// it says it waits
	steps := map[string]sdkStep{}
	var order []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var s sdkStep
		require.NoError(t, json.Unmarshal(sc.Bytes(), &s), sc.Text())
		name, _ := s["step"].(string)
		steps[name] = s
		if os.Getenv("SDK_E2E_DEBUG") != "" {
			t.Log(sc.Text())
		}
		order = append(order, name)
		if name == "waiting_for_approval" {
			h.approve(pendingApprovalOf(t, h, "move_base_to"))
		}
	}
	err = cmd.Wait()
	require.NoError(t, err, "client.mjs failed: %v\nstderr: %s\nsteps: %v\nerror step: %v", err, stderr.String(), order, steps["error"])
	require.Equal(t, []string{
		"initialized", "tools", "resources", "read_state", "subscribed", "state_tool", "waiting_for_approval",
		"motion", "read_state_after", "task_resource", "unknown_task", "failing_call", "done",
	}, order)

	// Then it initialized with the bridge's instructions and
	// subscribable resources
	init := steps["initialized"]
	require.Equal(t, "robot-bridge", init.m("server")["name"])
	ins, _ := init["instructions"].(string)
	require.Contains(t, ins, "Never call an action again to retry it")
	require.Contains(t, ins, "After LOOP_DETECTED stop calling that tool and tell the user")
	require.Equal(t, true, init.m("capabilities").m("resources")["subscribe"], "%v", init["capabilities"])

	// And every tool carries the annotations a host decides by
	tools, _ := steps["tools"]["tools"].([]any)
	require.NotEmpty(t, tools)
	seen := map[string]map[string]any{}
	for _, raw := range tools {
		tl := raw.(map[string]any)
		name := tl["name"].(string)
		a, _ := tl["annotations"].(map[string]any)
		require.NotNil(t, a, name)
		require.NotEmpty(t, a["title"], name)
		require.Equal(t, false, a["openWorldHint"], name)
		seen[name] = a
	}
	require.Equal(t, true, seen["get_robot_state"]["readOnlyHint"])
	require.Equal(t, true, seen["get_robot_state"]["idempotentHint"])
	require.Equal(t, true, seen["move_base_to"]["destructiveHint"])
	require.Equal(t, false, seen["move_base_to"]["readOnlyHint"])
	require.Equal(t, false, seen["stop"]["destructiveHint"])
	require.Equal(t, false, seen["cancel_task"]["destructiveHint"])
	// request_operator_help files an escalation: not read-only, not
	// idempotent, and it moves nothing
	require.Equal(t, false, seen["request_operator_help"]["destructiveHint"])
	require.Equal(t, false, seen["request_operator_help"]["idempotentHint"])
	require.Equal(t, false, seen["request_operator_help"]["readOnlyHint"])

	// And robot://state reads as get_robot_state's envelope
	rs := steps["read_state"]
	require.Equal(t, "application/json", rs["mime_type"])
	before := rs.m("envelope")
	require.Equal(t, true, before["ok"], "%v", before)
	require.Equal(t, "get_robot_state", before["tool"])
	st := steps["state_tool"]
	require.Equal(t, false, st["is_error"])
	require.Equal(t, true, st.m("envelope")["ok"])
	require.Equal(t, st.m("envelope")["tool"], st.m("structured")["tool"])

	// And the motion waited for the operator, reported progress rising to
	// the end, and succeeded; the robot moved and the host heard it
	mo := steps["motion"]
	require.Equal(t, false, mo["is_error"], "%v", mo["envelope"])
	env := mo.m("envelope")
	require.Equal(t, "succeeded", env["task"].(map[string]any)["status"], "%v", env)
	progress, _ := mo["progress"].([]any)
	require.GreaterOrEqual(t, len(progress), 2, "%v", progress)
	last := -1.0
	for _, raw := range progress {
		p := raw.(map[string]any)
		require.Greater(t, p["progress"].(float64), last, "progress must rise: %v", progress)
		last = p["progress"].(float64)
		require.EqualValues(t, 100, p["total"])
		require.NotEmpty(t, p["message"])
	}
	require.Contains(t, progress[0].(map[string]any)["message"], "awaiting_approval")
	require.InDelta(t, 100, last, 1e-9)
	require.GreaterOrEqual(t, mo["state_updates_while_moving"].(float64), 1.0, "no robot://state update while the robot moved: %v", mo["updates"])
	x0 := before["data"].(map[string]any)["base"].(map[string]any)["x"].(float64)
	afterEnv := steps["read_state_after"].m("envelope")
	x1 := afterEnv["data"].(map[string]any)["base"].(map[string]any)["x"].(float64)
	require.InDelta(t, 0.5, x1-x0, 0.1, "the robot should have driven 0.5 m")

	// And its task reads as a resource; an unknown task is not found
	tr := steps["task_resource"]
	require.Equal(t, "robot://tasks/"+env["task"].(map[string]any)["id"].(string), tr["uri"])
	require.Equal(t, "succeeded", tr.m("envelope")["task"].(map[string]any)["status"])
	// (-32602 with "Resource not found", as the MCP specification has
	// it since SEP-2164.)
	require.EqualValues(t, -32602, steps["unknown_task"]["code"], "%v", steps["unknown_task"])
	require.Contains(t, steps["unknown_task"]["message"], "Resource not found")

	// And a failing call is isError with the whole error object
	fc := steps["failing_call"]
	require.Equal(t, true, fc["is_error"])
	e := fc.m("structured").m("error")
	require.Equal(t, string(toolerr.SafetyViolation), e["type"], "%v", e)
	for _, k := range []string{"message", "retryable", "retry_after_ms", "suggestion", "details"} {
		require.Contains(t, e, k)
	}
	require.Equal(t, false, e["retryable"])
	require.Equal(t, fc.m("envelope")["error"], fc.m("structured")["error"])
	require.NotEmpty(t, fc.m("envelope")["robot"])
}

// pendingApprovalOf returns the task of the pending approval for tool.
func pendingApprovalOf(t *testing.T, h *harness, tool string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		code, body, err := h.tryDo("GET", "/v1/approvals?status=pending", h.operator, nil)
		require.NoError(t, err)
		require.Equal(t, 200, code, "%v", body)
		list, _ := body["approvals"].([]any)
		for _, a := range list {
			m := a.(map[string]any)
			if m["tool"] == tool {
				return m["task_id"].(string)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal(errors.New("no pending approval for " + tool))
	return ""
}
