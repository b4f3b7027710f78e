package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The parsers of what comes from outside: the model's responses (both
// APIs), their tool-call arguments, the bridge's event stream, and the
// result budget over any envelope.

func FuzzDecodeChatCompletion(f *testing.F) {
	f.Add([]byte(`{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"stop","arguments":"{\"reason\":1}"}}]}}]}`))
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}],"tool_calls":[{"function":{"name":"x","arguments":{"a":[1]}}}]}}]}`))
	f.Add([]byte(`{"error":"model not found"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeChatCompletion(raw)
		if err != nil {
			require.Empty(t, r.ToolCalls)
			return
		}
		for _, tc := range r.ToolCalls {
			require.NotEmpty(t, strings.TrimSpace(tc.Name))
			_ = canonicalArgs(tc.Arguments)
		}
	})
}

func FuzzDecodeAnthropicMessage(f *testing.F) {
	f.Add([]byte(`{"type":"message","content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"stop","input":{"reason":"x"}}]}`))
	f.Add([]byte(`{"type":"error","error":{"message":"x"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeAnthropicMessage(raw)
		if err != nil {
			return
		}
		for _, tc := range r.ToolCalls {
			require.True(t, json.Valid([]byte(tc.Arguments)))
		}
	})
}

func FuzzCanonicalArgs(f *testing.F) {
	f.Add(`{"x": 1, "y": 0}`)
	f.Add("```json\n{label: 'cup',}\n```")
	f.Add(`{"a": null}`)
	f.Fuzz(func(t *testing.T, s string) {
		c := canonicalArgs(s)
		if !strings.HasPrefix(c, "unparsed:") {
			require.True(t, json.Valid([]byte(c)), c)
			require.Equal(t, c, canonicalArgs(c), "canonical form is stable")
		}
	})
}

func FuzzReadSSE(f *testing.F) {
	f.Add("event: task\ndata: {\"data\":{\"task\":{\"id\":\"t\",\"status\":\"executing\"}}}\nid: 3\n\n")
	f.Add("event: hello\ndata: {\"text\":\"x\",\"robot\":{}}\n\n: c\n\nevent: missed\ndata: {}\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = readSSE(strings.NewReader(s), func(e sseEvent) bool {
			se, ok, err := decodeStreamEvent(e)
			if err == nil && ok && se.Kind == "task" {
				require.NotNil(t, se.Task)
				require.NotEmpty(t, se.Task.ID)
			}
			return true
		})
	})
}

func FuzzFitResult(f *testing.F) {
	f.Add(`{"ok":true,"tool":"describe_scene","text":"A cup. A plate.","data":{"x":"`+strings.Repeat("y", 800)+`"}}`, 600)
	f.Add(`not json at all `+strings.Repeat("z", 900), 512)
	f.Fuzz(func(t *testing.T, content string, budget int) {
		budget = MinResultBytes + abs(budget)%4096
		got, _ := fitResult(content, budget, []string{"label"})
		require.LessOrEqual(t, len(got), max(budget, len(content)))
		if len(content) > budget {
			require.True(t, json.Valid([]byte(got)), got)
			require.LessOrEqual(t, len(got), budget)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
