package toolapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/escalation"
	"github.com/robot-bridge/robot-bridge/fsm"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func helpHarness(t *testing.T) (*harness, *escalation.Service) {
	t.Helper()
	var svc *escalation.Service
	h := newHarness(t, func(c *Conf) {
		svc = escalation.New(escalation.Conf{Clock: c.Clock})
		c.Escalations = svc
	})
	return h, svc
}

type helpEnvelope struct {
	testEnvelope
	OperatorMessage *OperatorMessage `json:"operator_message"`
}

func (h *harness) callHelp(tool string, body any) helpEnvelope {
	h.t.Helper()
	status, out := h.do("POST", "/v1/tools/"+tool+"/call", testTokens.Agent, body)
	require.Equal(h.t, 200, status, string(out))
	var env helpEnvelope
	require.NoError(h.t, json.Unmarshal(out, &env))
	return env
}

func TestRequestOperatorHelp_FilesWithRecentCallsAndDeliversTheAnswerOnce(t *testing.T) {
	h, svc := helpHarness(t)
	ctx := context.Background()
	// Given a session whose last call failed
	bad := h.callHelp("move_base_to", map[string]any{"arguments": map[string]any{"x": 99}, "session_id": "s1"})
	require.Equal(t, toolerr.InvalidParams, bad.Error.Type)

	// When the agent asks for help
	env := h.callHelp(ToolRequestOperatorHelp, map[string]any{
		"arguments": map[string]any{"summary": "move_base_to keeps\nfailing\x07; where may I drive?"}, "session_id": "s1",
	})

	// Then an open escalation is filed with the session's failed call
	require.True(t, env.OK, "%+v", env.Error)
	var data struct {
		Escalation escalation.Escalation `json:"escalation"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &data))
	e := data.Escalation
	require.Equal(t, escalation.StatusOpen, e.Status)
	require.Equal(t, "move_base_to keeps failing; where may I drive?", e.Summary)
	require.Equal(t, escalation.SourceAgent, e.Source)
	require.Equal(t, "s1", e.SessionID)
	require.Len(t, e.Recent, 1)
	require.Equal(t, "move_base_to", e.Recent[0].Tool)
	require.Equal(t, string(toolerr.InvalidParams), e.Recent[0].ErrorType)
	require.Contains(t, e.Recent[0].Args, `"x":99`)
	require.Contains(t, env.Text, "An operator has been asked for help (escalation "+e.ID)
	require.Contains(t, env.Text, "operator_message of the first tool result you get after they answer")
	require.Nil(t, env.OperatorMessage)

	// When the operator answers
	_, err := svc.Answer(ctx, e.ID, "operator", "Drive to the kitchen instead.")
	require.NoError(t, err)

	// Then another session's call does not carry it
	other := h.callHelp(ToolGetRobotState, map[string]any{"arguments": map[string]any{}, "session_id": "s2"})
	require.Nil(t, other.OperatorMessage)
	// And the session's next call carries it once, first in its text
	next := h.callHelp(ToolGetRobotState, map[string]any{"arguments": map[string]any{}, "session_id": "s1"})
	require.Equal(t, &OperatorMessage{EscalationID: e.ID, Text: "Drive to the kitchen instead.", By: "operator"}, next.OperatorMessage)
	require.True(t, strings.HasPrefix(next.Text, "The operator answered your request for help: Drive to the kitchen instead. The robot is"), next.Text)
	after := h.callHelp(ToolGetRobotState, map[string]any{"arguments": map[string]any{}, "session_id": "s1"})
	require.Nil(t, after.OperatorMessage)
	require.NotContains(t, after.Text, "operator answered")
}

func TestRequestOperatorHelp_RefusesBadArguments(t *testing.T) {
	h, svc := helpHarness(t)
	h.tasks.put(actions.TaskView{ID: "t-mine", Tool: "move_base_to", Status: fsm.Executing, Principal: "agent", SessionID: "s1"})
	h.tasks.put(actions.TaskView{ID: "t-other", Tool: "move_base_to", Status: fsm.Executing, Principal: "agent", SessionID: "s2"})
	for _, tc := range []struct {
		name  string
		args  map[string]any
		field string
	}{
		{"no summary", map[string]any{}, "summary"},
		{"only control characters", map[string]any{"summary": "\x00\x01"}, "summary"},
		{"too long", map[string]any{"summary": strings.Repeat("a", 2001)}, "summary"},
		{"another session's task", map[string]any{"summary": "help", "task_id": "t-other"}, "task_id"},
		{"unknown task", map[string]any{"summary": "help", "task_id": "t-nope"}, "task_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := h.callHelp(ToolRequestOperatorHelp, map[string]any{"arguments": tc.args, "session_id": "s1"})
			require.False(t, env.OK)
			require.Equal(t, toolerr.InvalidParams, env.Error.Type)
			require.Contains(t, env.Error.Message, tc.field)
		})
	}
	require.Empty(t, svc.List(), "a refused call files nothing")

	// And the session's own task is accepted
	env := h.callHelp(ToolRequestOperatorHelp, map[string]any{"arguments": map[string]any{"summary": "help", "task_id": "t-mine"}, "session_id": "s1"})
	require.True(t, env.OK, "%+v", env.Error)
	require.Equal(t, "t-mine", svc.List()[0].TaskID)
}

func TestLoopDetected_RaisesOneEscalationPerEpisode(t *testing.T) {
	h, svc := helpHarness(t)
	body := map[string]any{"arguments": map[string]any{"x": 99}, "session_id": "s1"}
	// Given a session that repeats a failing call past the threshold
	for range 2 {
		require.Equal(t, toolerr.InvalidParams, h.call("move_base_to", body).Error.Type)
	}
	for range 3 {
		require.Equal(t, toolerr.LoopDetected, h.call("move_base_to", body).Error.Type)
	}
	// Then exactly one escalation is raised, from the loop guard, with
	// the calls that led there
	es := svc.List()
	require.Len(t, es, 1)
	require.Equal(t, escalation.SourceLoopDetected, es[0].Source)
	require.Equal(t, "s1", es[0].SessionID)
	require.Len(t, es[0].Recent, 3)
	require.Equal(t, string(toolerr.LoopDetected), es[0].Recent[2].ErrorType)
	require.Contains(t, es[0].Summary, "LOOP_DETECTED")
}
