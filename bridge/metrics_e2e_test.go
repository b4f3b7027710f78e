package bridge

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// Observability end to end (issue 6): /metrics checked by promtool, tool
// call counters with the right labels, the alert rules checked and
// unit-tested by promtool, and log lines that never hold a token or a
// sensitive argument.

// promtool returns promtool's path, failing the test with the install
// command when it is missing.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed; install Debian's Prometheus package: sudo apt-get install -y prometheus (or `make test-deps`)")
	}
	return p
}

// scrape fetches /metrics (no token: it is public) and parses it.
func scrape(t *testing.T, h *harness) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := h.client.Get(h.base + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(t, err)
	return raw, fams
}

// metricValue is the value of the series of name with exactly these
// labels (a histogram's sample count), and whether it exists.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	mf, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] != lp.GetValue() {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetrics_PromtoolChecksTheExpositionAndCountersMove(t *testing.T) {
	bin := promtool(t)
	h := startHarness(t, nil)
	// Given a few tool calls: two reads, a refused move, a move that is
	// cancelled while it waits for approval, and a stop
	for range 2 {
		require.Equal(t, true, h.call("get_robot_state", args(nil))["ok"])
	}
	requireError(t, h.call("move_base_to", args(map[string]any{"x": 99, "y": 0})), "INVALID_PARAMS", false)
	id := taskID(t, h.call("move_base_to", args(map[string]any{"x": 0.3, "y": 0})))
	h.pendingApproval(id)
	require.Equal(t, true, h.call("cancel_task", args(map[string]any{"task_id": id}))["ok"])
	require.Equal(t, true, h.call("stop", args(map[string]any{"reason": "metrics test"}))["ok"])
	require.NoError(t, h.b.Store().Sync(t.Context()))

	// When /metrics is scraped
	raw, fams := scrape(t, h)

	// Then promtool accepts the exposition
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)

	// And the counters moved, with the names and labels
	tests := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"robot_bridge_tool_calls_total", map[string]string{"tool": "get_robot_state", "kind": "state", "outcome": "ok", "error_type": "none"}, 2},
		{"robot_bridge_tool_calls_total", map[string]string{"tool": "move_base_to", "kind": "action", "outcome": "error", "error_type": "INVALID_PARAMS"}, 1},
		{"robot_bridge_tool_calls_total", map[string]string{"tool": "move_base_to", "kind": "action", "outcome": "ok", "error_type": "none"}, 1},
		{"robot_bridge_tool_calls_total", map[string]string{"tool": "stop", "kind": "action", "outcome": "ok", "error_type": "none"}, 1},
		{"robot_bridge_tool_call_duration_seconds", map[string]string{"tool": "get_robot_state"}, 2},
		{"robot_bridge_tasks", map[string]string{"state": "cancelled"}, 1},
		{"robot_bridge_approval_wait_seconds", map[string]string{"decision": "cancelled"}, 1},
		// One stop at start (restart recovery) and one from the stop tool.
		{"robot_bridge_safety_events_total", map[string]string{"kind": "stop_sent"}, 2},
		{"robot_bridge_stop_latency_seconds", nil, 2},
		{"robot_bridge_robot_link_up", nil, 1},
		{"robot_bridge_store_write_duration_seconds", map[string]string{"op": "transition"}, 3},
	}
	for _, tc := range tests {
		v, ok := metricValue(fams, tc.name, tc.labels)
		require.True(t, ok, "no series %s%v", tc.name, tc.labels)
		require.GreaterOrEqual(t, v, tc.min, "%s%v", tc.name, tc.labels)
	}
	v, ok := metricValue(fams, "robot_bridge_tasks", map[string]string{"state": "awaiting_approval"})
	require.True(t, ok)
	require.Zero(t, v, "the cancelled task left awaiting_approval")
	v, ok = metricValue(fams, "robot_bridge_breaker_state", map[string]string{"dependency": "robot_state"})
	require.True(t, ok)
	require.Zero(t, v, "breaker closed")
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "robot_bridge_store_dropped_total"} {
		require.Contains(t, fams, name)
	}
	// And no label value is an id or free text
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				require.NotContains(t, lp.GetValue(), id, "%s carries a task id", name)
				require.NotContains(t, lp.GetValue(), "metrics test", "%s carries free text", name)
			}
		}
	}
	// And every metric the alert rules use exists
	rules, err := os.ReadFile(filepath.Join("..", "deploy", "prometheus", "robot-bridge.rules.yml"))
	require.NoError(t, err)
	for _, loc := range regexp.MustCompile(`\brobot_bridge_[a-z_]+`).FindAllStringIndex(string(rules), -1) {
		if loc[0] > 0 && rules[loc[0]-1] == ':' {
			continue // a recording rule's own name (level:metric:operations)
		}
		name := string(rules[loc[0]:loc[1]])
		if strings.HasPrefix(name, "robot_bridge_cluster_") {
			// Exported by a bridge in a cluster only; the cluster test
			// (cluster_e2e_test.go) reads them from a bridge's /metrics.
			continue
		}
		base := strings.TrimSuffix(name, "_bucket")
		require.Contains(t, fams, base, "the rules use %s, which the bridge does not export", name)
	}
}

func TestAlertRules_PromtoolChecksAndUnitTestsThem(t *testing.T) {
	bin := promtool(t)
	dir := filepath.Join("..", "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "robot-bridge.rules.yml"},
		{"test", "rules", "robot-bridge.rules_test.yml"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS")
	}
}

// lockedBuffer collects log output from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestLogs_NoLineHoldsATokenOrASensitiveArgument(t *testing.T) {
	// Given the whole bridge logging JSON lines at debug level
	buf := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, stop := bootAt(t, t.TempDir(), nil, logger)
	secret := "tell-nobody-7731"
	// When the agent calls stop with a sensitive reason, with its token
	// and a request id
	req, err := http.NewRequest("POST", h.base+"/v1/tools/stop/call",
		strings.NewReader(`{"arguments":{"reason":"`+secret+`"},"session_id":"sess-logs"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.agent)
	req.Header.Set("X-Request-Id", "req-logs-1")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "req-logs-1", resp.Header.Get("X-Request-Id"))
	// And an operator reads the audit trail with a traceparent
	req, err = http.NewRequest("GET", h.base+"/v1/audit?limit=3", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.operator)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err = h.client.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	// And someone guesses a token
	code, _ := h.do("GET", "/v1/tools", "not-the-token-but-secret-0000", nil)
	require.Equal(t, http.StatusUnauthorized, code)
	stop()

	// Then no line holds a token or the sensitive argument
	out := buf.String()
	for _, s := range []string{h.agent, h.operator, "not-the-token-but-secret-0000", secret} {
		require.NotContains(t, out, s)
	}
	// And the stop call's line has the trace id, session, tool, attempt,
	// duration and the redacted argument
	var call map[string]any
	traced := 0
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		m := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(line), &m), "not a JSON line: %s", line)
		if m["msg"] == "tool call" && m["tool"] == "stop" {
			call = m
		}
		if m["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" {
			traced++
		}
	}
	require.NotNil(t, call, out)
	require.Equal(t, "req-logs-1", call["trace_id"])
	require.Equal(t, "sess-logs", call["session_id"])
	require.Equal(t, "action", call["kind"])
	require.InDelta(t, 1.0, call["attempt"], 1e-9)
	require.Contains(t, call, "duration")
	require.Equal(t, map[string]any{"reason": "[redacted]"}, call["args"])
	require.Positive(t, traced, "the traceparent's trace id is in the request's log line")
}
