package bridge

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// Issue 17 item 4's Done-when line: an escalation from the agent appears
// in the console, in Debian's headless Chromium, and the operator's
// answer reaches the agent on its event stream and, once, in its next
// tool result.
func TestE2E_ConsoleHandOff_AgentAsksOperatorAnswers(t *testing.T) {
	h := startHarness(t, nil)
	br := startBrowser(t)
	signInConsole(br, h)
	stream := openSSE(t, h.base, "/v1/agent/events", h.agent)
	t.Cleanup(stream.Close)
	stream.next(t, "hello", 10*time.Second, nil)

	// Given a session whose drive was refused
	bad := h.call("move_base_to", args(map[string]any{"x": 99.0, "y": 0.0}, "session_id", "handoff"))
	require.Equal(t, "INVALID_PARAMS", errType(bad))

	// When the agent asks for help over HTTP
	env := h.call("request_operator_help", args(map[string]any{"summary": "My drive to x=99 was refused. Where should I go?"}, "session_id", "handoff"))
	require.Equal(t, true, env["ok"], env)
	esc := env["data"].(map[string]any)["escalation"].(map[string]any)
	id := esc["id"].(string)
	require.Equal(t, "open", esc["status"])

	// Then the console's header counts it with the oldest's age, and its
	// panel shows the summary and the session's failed call
	item := `#help li[data-escalation-id=` + q(id) + `]`
	br.run("escalation shown", 10*time.Second, chromedp.WaitVisible(chromedp.CSS(item)))
	require.Regexp(t, `^1 request for help · oldest \d+`, evalJS[string](br, `document.getElementById('help-status').textContent`))
	require.False(t, evalJS[bool](br, `document.getElementById('help-status').hidden`))
	require.Equal(t, "1", evalJS[string](br, `document.getElementById('help-count').textContent`))
	require.Equal(t, "My drive to x=99 was refused. Where should I go?", evalJS[string](br, `document.querySelector(`+q(item+` .summary`)+`).textContent`))
	require.Contains(t, evalJS[string](br, `document.querySelector(`+q(item)+`).textContent`), "The agent asks for help")
	calls := evalJS[[]string](br, `[...document.querySelectorAll(`+q(item+` .calls li`)+`)].map(l => l.textContent)`)
	require.Len(t, calls, 1)
	require.Contains(t, calls[0], "move_base_to")
	require.Contains(t, calls[0], "failed: INVALID_PARAMS")
	br.keepShot("help-request")

	// When the operator types an answer and sends it
	answer := "Drive to the kitchen instead."
	br.run("answer", 10*time.Second,
		chromedp.SendKeys(chromedp.CSS(item+` textarea`), answer),
		chromedp.Click(chromedp.CSS(item+` button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.CSS(item)),
	)
	require.True(t, evalJS[bool](br, `document.getElementById('help-status').hidden`), "nothing waits any more")

	// Then the agent's event stream carries the answer
	ev := stream.next(t, "escalation", 10*time.Second, func(e sseEvent) bool {
		var w struct {
			Data struct {
				Escalation struct {
					ID     string `json:"id"`
					Status string `json:"status"`
				} `json:"escalation"`
			} `json:"data"`
		}
		return json.Unmarshal([]byte(e.Data), &w) == nil && w.Data.Escalation.ID == id && w.Data.Escalation.Status == "answered"
	})
	var w struct {
		Data struct {
			Text       string `json:"text"`
			Escalation struct {
				Answer struct {
					Text string `json:"text"`
					By   string `json:"by"`
				} `json:"answer"`
			} `json:"escalation"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &w))
	require.Equal(t, answer, w.Data.Escalation.Answer.Text)
	require.Equal(t, "operator", w.Data.Escalation.Answer.By)
	require.Contains(t, w.Data.Text, answer)

	// And the session's next tool call carries it once, the one after not
	next := h.call("get_robot_state", args(map[string]any{}, "session_id", "handoff"))
	msg, ok := next["operator_message"].(map[string]any)
	require.True(t, ok, "the next envelope carries the answer: %v", next)
	require.Equal(t, map[string]any{"escalation_id": id, "text": answer, "by": "operator"}, msg)
	require.Contains(t, next["text"], "The operator answered your request for help: "+answer)
	after := h.call("get_robot_state", args(map[string]any{}, "session_id", "handoff"))
	require.NotContains(t, after, "operator_message")
	require.NotContains(t, after["text"], "operator answered")
}
