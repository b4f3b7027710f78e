package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// scriptedMessages is an Anthropic Messages API server that replays a
// script as tool_use and text blocks and checks every request: roles
// alternate from a user message, every tool_use is answered by a
// tool_result in the next message, and the tools are in Anthropic's shape.
type scriptedMessages struct {
	mu       sync.Mutex
	replies  []scriptReply
	requests []antRequest
	problems []string
	keys     []string
}

type antRequest struct {
	System   string           `json:"system"`
	Messages []antMessage     `json:"messages"`
	Tools    []map[string]any `json:"tools"`
}

func (s *scriptedMessages) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, r.Header.Get("x-api-key")+"|"+r.Header.Get("anthropic-version"))
	var cur antRequest
	if err := json.NewDecoder(r.Body).Decode(&cur); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.requests = append(s.requests, cur)
	for i, tool := range cur.Tools {
		if _, ok := tool["input_schema"]; !ok {
			s.problems = append(s.problems, fmt.Sprintf("tool %d has no input_schema", i))
		}
	}
	for i, m := range cur.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			s.problems = append(s.problems, fmt.Sprintf("message %d is %s, want %s", i, m.Role, want))
		}
		for _, b := range m.Content {
			if b.Type != "tool_use" {
				continue
			}
			answered := false
			if i+1 < len(cur.Messages) {
				for _, nb := range cur.Messages[i+1].Content {
					answered = answered || (nb.Type == "tool_result" && nb.ToolUseID == b.ID && json.Valid([]byte(nb.Content)))
				}
			}
			if !answered {
				s.problems = append(s.problems, fmt.Sprintf("message %d: tool_use %s has no valid tool_result next", i, b.ID))
			}
		}
	}
	var reply scriptReply
	if len(s.replies) > 0 {
		reply, s.replies = s.replies[0], s.replies[1:]
	} else {
		reply.Content = "SCRIPT EXHAUSTED"
	}
	var blocks []map[string]any
	if reply.Content != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": reply.Content})
	}
	for _, tc := range reply.ToolCalls {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_" + tc.ID, "name": tc.Name, "input": json.RawMessage(tc.Arguments)})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "message", "role": "assistant", "content": blocks, "stop_reason": "end_turn"})
}

func TestScenario_Anthropic_ParallelBatchWithOneFailure(t *testing.T) {
	// Given the real bridge and a scripted Messages API model
	b := startBridge(t, nil)
	sc := loadScript(t, "parallel_batch_one_failure")
	s := &scriptedMessages{replies: sc.Replies}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	model, err := NewAnthropic(AnthropicConf{BaseURL: srv.URL, Model: "scripted", APIKey: "key-for-tests"})
	require.NoError(t, err)
	a, err := New(Conf{BridgeURL: b.base, Token: testAgentTok, Model: model})
	require.NoError(t, err)
	// When the agent runs the turn
	res, err := a.Turn(context.Background(), sc.Prompt)
	require.NoError(t, err)
	// Then the tool_use blocks went through /v1/tool_calls and came back
	// as tool_result blocks, the failing one marked is_error
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.problems)
	require.Len(t, s.requests, 2)
	require.Equal(t, []string{"key-for-tests|2023-06-01", "key-for-tests|2023-06-01"}, s.keys)
	require.Contains(t, s.requests[0].System, "What each error type asks of you:")
	last := s.requests[1].Messages[len(s.requests[1].Messages)-1]
	require.Equal(t, "user", last.Role)
	require.Len(t, last.Content, 3)
	var isErr []bool
	for _, blk := range last.Content {
		require.Equal(t, "tool_result", blk.Type)
		isErr = append(isErr, blk.IsError)
	}
	require.Equal(t, []bool{false, false, true}, isErr)
	require.Equal(t, EndAnswered, res.End)
	require.Equal(t, sc.Replies[1].Content, res.Answer)
}
