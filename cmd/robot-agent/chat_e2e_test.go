package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// approveAll approves every pending approval request of the bridge at
// base, as an operator at the console would, until the test ends.
func approveAll(t *testing.T, base string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	hc := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+operatorTok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return nil
		}
		return resp
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if resp := do(http.MethodGet, "/v1/approvals?status=pending"); resp != nil {
				var body struct {
					Approvals []struct {
						ID string `json:"id"`
					} `json:"approvals"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				_ = resp.Body.Close()
				for _, a := range body.Approvals {
					if r := do(http.MethodPost, "/v1/approvals/"+a.ID+"/approve"); r != nil {
						_ = r.Body.Close()
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

func TestChat_ShowsApprovalAndProgress(t *testing.T) {
	// Given the real bridge, an operator who approves, and a model that
	// drives half a metre, then answers
	base := startBridge(t)
	approveAll(t, base)
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": "The robot drove half a metre forward."}
		if first {
			msg = map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "move_base_to", "arguments": `{"x": 0.5, "y": 0}`},
			}}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": msg}}})
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"OPENAI_BASE_URL": srv.URL + "/v1", "ROBOT_BRIDGE_AGENT_TOKEN": agentTok}
	// When the user asks for it in chat
	code, out, errOut := runCmd(env, "drive half a metre forward\n", "chat", "--bridge", base, "--model", "scripted")
	// Then the terminal showed the call, the wait for approval, a progress
	// bar and the end of the task, then the answer
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, `-> move_base_to {"x": 0.5, "y": 0}`)
	require.Regexp(t, `   move_base_to: task task-\S+ is waiting for operator approval\n`, out)
	require.Regexp(t, `\n   task task-\S+ \[[#.]{10}\] +\d+% `, out)
	require.Regexp(t, `\n   task task-\S+: succeeded\n`, out)
	require.Contains(t, out, "The robot drove half a metre forward.\n(answered, 2 model calls, 1 tool calls, ")
}
