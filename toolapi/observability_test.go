package toolapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/robot"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines decodes every JSON log line.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

func withJSONLog(buf *syncBuffer) func(*Conf) {
	return func(c *Conf) {
		c.Logger = slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// counter reads robot_bridge_tool_calls_total for one label set (0 when
// the series does not exist).
func counter(t *testing.T, reg *prometheus.Registry, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "robot_bridge_tool_calls_total" {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestMetrics_ToolCallCountersCarryBoundedLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(c *Conf) { c.Registerer = reg })
	// Given a state read, an action, a bad action call and a made-up tool
	require.True(t, h.call("get_robot_state", args(nil)).OK)
	require.True(t, h.call("get_robot_state", args(nil)).OK)
	require.True(t, h.call("move_base_to", args(map[string]any{"location": "dock"})).OK)
	require.False(t, h.call("move_base_to", args(map[string]any{"x": 99.0, "y": 0.0})).OK)
	require.False(t, h.call("teleport-task-1234", args(nil)).OK)
	// Then the counters moved with the tool, kind, outcome and error type
	tests := []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"tool": "get_robot_state", "kind": "state", "outcome": "ok", "error_type": "none"}, 2},
		{map[string]string{"tool": "move_base_to", "kind": "action", "outcome": "ok", "error_type": "none"}, 1},
		{map[string]string{"tool": "move_base_to", "kind": "action", "outcome": "error", "error_type": "INVALID_PARAMS"}, 1},
		{map[string]string{"tool": "unknown", "kind": "unknown", "outcome": "error", "error_type": "UNKNOWN_TOOL"}, 1},
	}
	for _, tc := range tests {
		require.InDelta(t, tc.want, counter(t, reg, tc.labels), 1e-9, "%v", tc.labels)
	}
	// And no label carries the made-up name (labels stay bounded)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				require.NotContains(t, lp.GetValue(), "teleport")
			}
		}
	}
	require.Contains(t, names, "robot_bridge_tool_call_duration_seconds")
	require.Contains(t, names, "robot_bridge_breaker_state")
}

func TestMetrics_BreakerStateFollowsTheBreaker(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, func(c *Conf) { c.Registerer = reg; c.BreakerFailures = 2; c.ReadAttempts = 1 })
	h.robot.LatestFn = func(context.Context) (robot.State, error) { return robot.State{}, errors.New("link flapping") }
	breaker := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "robot_bridge_breaker_state" {
				for _, m := range mf.GetMetric() {
					if m.GetLabel()[0].GetValue() == "robot_state" {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatal("no breaker_state{dependency=robot_state}")
		return -1
	}
	// Given a closed breaker
	require.Zero(t, breaker())
	// When reads keep failing
	for range 3 {
		h.call("get_robot_state", args(nil))
	}
	// Then the gauge shows it open
	require.InDelta(t, 2.0, breaker(), 1e-9)
}

func TestTrace_IDFromTraceparentRequestIDOrNew(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	tests := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"traceparent", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"traceparent wins over request id", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "X-Request-Id": "req-1"}, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"request id", map[string]string{"X-Request-Id": "req-42.a:b"}, "req-42.a:b"},
		{"all-zero traceparent is invalid", map[string]string{"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, ""},
		{"request id with a tab is ignored", map[string]string{"X-Request-Id": "a\tb"}, ""},
		{"nothing", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			buf := &syncBuffer{}
			h := newHarness(t, withJSONLog(buf))
			// When a call comes with these headers
			req, err := http.NewRequest("POST", h.ts.URL+"/v1/tools/get_robot_state/call", strings.NewReader(`{"session_id":"s-1"}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+testTokens.Agent)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			resp, err := h.ts.Client().Do(req)
			require.NoError(t, err)
			_ = resp.Body.Close()
			// Then the response and the call's log line carry its trace id
			got := resp.Header.Get("X-Request-Id")
			if tc.want != "" {
				require.Equal(t, tc.want, got)
			} else {
				require.Regexp(t, hex32, got)
			}
			var call map[string]any
			for _, l := range buf.lines(t) {
				if l["msg"] == "tool call" {
					call = l
				}
			}
			require.NotNil(t, call, buf.String())
			require.Equal(t, got, call["trace_id"])
			require.Equal(t, "s-1", call["session_id"])
			require.Equal(t, "toolapi", call["component"])
		})
	}
}

func TestLogs_NeverHoldTokensOrSensitiveArguments(t *testing.T) {
	// Given a logger at debug level, the most verbose there is
	buf := &syncBuffer{}
	h := newHarness(t, withJSONLog(buf))
	h.tasks.StopFn = func(_ context.Context, _, reason string) (actions.StopReport, error) {
		require.Equal(t, "call 555-0199 about my-private-reason", reason, "the reason still reaches the runner")
		return actions.StopReport{Text: "stopped"}, nil
	}
	// When the agent calls stop with a sensitive reason, with its token
	env := h.call("stop", map[string]any{"arguments": map[string]any{"reason": "call 555-0199 about my-private-reason"}, "session_id": "sess-9"})
	require.True(t, env.OK)
	// And a call with a wrong token fails
	status, _ := h.do("POST", "/v1/tools/stop/call", "wrong-token-but-still-a-secret", map[string]any{})
	require.Equal(t, http.StatusUnauthorized, status)
	// Then no log line holds a token or the reason
	out := buf.String()
	require.NotEmpty(t, out)
	for _, secret := range []string{testTokens.Agent, testTokens.Operator, "wrong-token-but-still-a-secret", "my-private-reason", "555-0199"} {
		require.NotContains(t, out, secret)
	}
	// And the call's line says what happened, with the argument redacted
	var call map[string]any
	for _, l := range buf.lines(t) {
		if l["msg"] == "tool call" && l["tool"] == "stop" {
			call = l
		}
	}
	require.NotNil(t, call, out)
	require.Equal(t, map[string]any{"reason": Redacted}, call["args"])
	require.Equal(t, "sess-9", call["session_id"])
	require.InDelta(t, 1.0, call["attempt"], 1e-9)
	require.Contains(t, call, "duration")
	require.Contains(t, call, "trace_id")
}

func TestLogs_AttemptCountsStateReadRetries(t *testing.T) {
	buf := &syncBuffer{}
	h := newHarness(t, withJSONLog(buf))
	var n int
	var mu sync.Mutex
	h.robot.LatestFn = func(context.Context) (robot.State, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return robot.State{}, errors.New("one hiccup")
		}
		return testState(), nil
	}
	// When a state read fails once and then succeeds
	require.True(t, h.call("get_robot_state", args(nil)).OK)
	// Then the call's line says it took two attempts
	for _, l := range buf.lines(t) {
		if l["msg"] == "tool call" {
			require.InDelta(t, 2.0, l["attempt"], 1e-9)
			return
		}
	}
	t.Fatal("no tool call line")
}

func TestRegistry_Redact(t *testing.T) {
	reg, err := NewRegistry(loadSimConfig(t))
	require.NoError(t, err)
	tests := []struct {
		name string
		tool string
		in   map[string]any
		want map[string]any
	}{
		{"sensitive argument", "stop", map[string]any{"reason": "x"}, map[string]any{"reason": Redacted}},
		{"nothing sensitive", "move_base_to", map[string]any{"x": 1.0, "y": 2.0}, map[string]any{"x": 1.0, "y": 2.0}},
		{"unknown tool: everything", "secret_tool", map[string]any{"a": "b"}, map[string]any{"a": Redacted}},
		{"nil arguments", "stop", nil, map[string]any{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string]any{}
			maps.Copy(in, tc.in)
			require.Equal(t, tc.want, reg.Redact(tc.tool, tc.in))
			if tc.in != nil {
				require.Equal(t, in, tc.in, "the input is not modified")
			}
		})
	}
	stop, _ := reg.Lookup("stop")
	require.Equal(t, []string{"reason"}, stop.SensitiveArgs())
}
