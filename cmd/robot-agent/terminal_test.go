package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/agent"
)

func TestTerminal_ShowsCallsApprovalsAndProgress(t *testing.T) {
	// Given a terminal and a task's life as the agent event stream shows it
	var out bytes.Buffer
	tr := &terminal{out: &out}
	call := agent.ToolCall{ID: "call_1", Name: "move_base_to", Arguments: `{"location": "table"}`}
	tr.ToolCall(call, true)
	tr.ToolResult(call, agent.CallResult{Tool: "move_base_to", OK: true, TaskID: "task-1", TaskStatus: "awaiting_approval"})
	for _, ts := range []agent.TaskStatus{
		{ID: "task-1", Status: "awaiting_approval"},
		{ID: "task-1", Status: "approved"},
		{ID: "task-1", Status: "executing", Fraction: 0.05, Text: "driving to the table"},
		{ID: "task-1", Status: "executing", Fraction: 0.42, Text: "driving to the table, 1.0 m to go"},
		{ID: "task-1", Status: "executing", Fraction: 0.47, Text: "driving to the table, 0.9 m to go"},
		{ID: "task-1", Status: "executing", Fraction: 1, Text: "at the table"},
		{ID: "task-1", Status: "succeeded"},
	} {
		tr.TaskUpdate(ts)
	}
	tr.ToolCall(call, false)
	tr.ToolResult(call, agent.CallResult{Tool: "move_base_to", ErrorType: "APPROVAL_DENIED", Message: "not sent: the operator refused it.", NotSent: true})
	// Then each step is one plain line, the bar once per tenth
	require.Equal(t, `-> move_base_to {"location": "table"}
   move_base_to: task task-1 is waiting for operator approval
   task task-1: waiting for operator approval
   task task-1: approved
   task task-1 [..........]   5% driving to the table
   task task-1 [####......]  42% driving to the table, 1.0 m to go
   task task-1 [##########] 100% at the table
   task task-1: succeeded
-> move_base_to {"location": "table"}   (not sent: a repeat the agent answers itself)
   failed move_base_to: not sent: the operator refused it.
`, out.String())
}
