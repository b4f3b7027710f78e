package bridge

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestE2E_AgentEventsCarryTheAgentsTaskAndTheRobotOnly: on a running
// bridge, an agent waiting on GET /v1/agent/events hears its motion go
// from awaiting approval to succeeded and the robot move, while the
// operator's stream at the same moment carries the approval request and
// decision that never reach the agent.
func TestE2E_AgentEventsCarryTheAgentsTaskAndTheRobotOnly(t *testing.T) {
	// Given a bridge, the agent on its event stream and the operator on
	// theirs
	h := startHarness(t, nil)
	agent := openSSE(t, h.base, "/v1/agent/events", h.agent)
	defer agent.Close()
	operator := openSSE(t, h.base, "/v1/events", h.operator)
	defer operator.Close()
	hello := agent.next(t, "hello", 5*time.Second, nil)
	require.Contains(t, hello.Data, "None of your tasks holds the robot.")
	operator.next(t, "hello", 5*time.Second, nil)

	// When the agent asks to drive 0.3 m and the operator approves
	env := h.call("move_base_to", args(map[string]any{"x": 0.3, "y": 0.0}, "session_id", "events-e2e"))
	task := taskID(t, env)
	h.approve(task)

	// Then the operator's stream carried the approval request and its
	// decision
	for _, kind := range []string{`"approval.created"`, `"approval.approved"`} {
		operator.next(t, "approval", 10*time.Second, func(e sseEvent) bool {
			return strings.Contains(e.Data, kind) && strings.Contains(e.Data, task)
		})
	}

	// And the agent's stream carried its task to the end and the robot
	// moving, and nothing of the approval service, the safety supervisor
	// or the system
	statuses := map[string]bool{}
	moving := false
	deadline := time.After(60 * time.Second)
	for !statuses["succeeded"] {
		select {
		case ev, ok := <-agent.Events:
			require.True(t, ok, "agent stream ended")
			switch ev.Name {
			case "task":
				var w struct {
					Seq  uint64 `json:"seq"`
					Data struct {
						Text string `json:"text"`
						Task struct {
							ID     string `json:"id"`
							Status string `json:"status"`
						} `json:"task"`
					} `json:"data"`
				}
				require.NoError(t, json.Unmarshal([]byte(ev.Data), &w), ev.Data)
				require.Equal(t, task, w.Data.Task.ID)
				require.Equal(t, ev.ID, jsonUint(w.Seq))
				require.NotEmpty(t, w.Data.Text)
				statuses[w.Data.Task.Status] = true
			case "state":
				if strings.Contains(ev.Data, `"condition":"moving"`) {
					moving = true
				}
			case ":":
			default:
				t.Fatalf("the agent's stream carried a %q event: %s", ev.Name, ev.Data)
			}
			require.NotContains(t, ev.Data, "apr_", "an approval id reached the agent's stream")
		case <-deadline:
			t.Fatalf("task %s did not succeed on the agent's stream; saw %v", task, statuses)
		}
	}
	require.True(t, statuses["executing"], "%v", statuses)
	require.True(t, moving, "no state event showed the robot moving")
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }
