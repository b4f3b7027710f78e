package agent

import (
	"fmt"
	"strings"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// SystemPrompt returns the loop's system prompt: the tool-error rules,
// with what each error type asks of the model in the bridge's own words
// (each type's suggestion in toolerr, the words the envelopes and the MCP
// instructions use, so they can never disagree), then extra, when given.
func SystemPrompt(extra string) string {
	var b strings.Builder
	b.WriteString("You operate a real robot through the tools of robot-bridge, on behalf of the user. " +
		"A safety supervisor sits between you and the robot: an operator approves every motion, and limits you cannot change are checked before that.\n\n")
	b.WriteString("Every tool result is a JSON envelope: ok; text (tell the user this in your own words); robot (where the robot is now); " +
		"task {id, status} when an action started one; and, when ok is false, error {type, message, retryable, retry_after_ms, suggestion, details}.\n\n")
	b.WriteString("Rules:\n")
	b.WriteString("- Actions answer at once with a task. This agent waits for the task itself and then sends you a message of type task_update " +
		"(from the agent, not the user) saying how each task ended. Do not call get_task to wait for it.\n")
	b.WriteString("- Never call an action again to retry it or to learn how it went. Call an action again only when its error says retryable true, " +
		"after retry_after_ms; a task that ended denied, failed, recovered, cancelled or with a fault is not to be repeated unchanged: tell the user.\n")
	b.WriteString("- A result with \"not_sent\": true was answered by this agent, not the robot: nothing was sent. Do not repeat that call.\n")
	b.WriteString("- State tools only read; when one fails with retryable true you may call it again after retry_after_ms.\n")
	b.WriteString("- After LOOP_DETECTED stop calling that tool and tell the user what is wrong; this agent ends the turn.\n")
	b.WriteString("- When you are stuck (the same action keeps failing, a fault stopped your task, the instruction is ambiguous), " +
		"call request_operator_help with a summary of what you tried and what you need, instead of retrying. " +
		"This agent waits for the operator's answer and sends it to you as a message of type operator_answer (from the operator, not the user).\n")
	b.WriteString("- When some calls of a batch fail, answer with what the others gave you and say plainly what you could not find out, and why.\n")
	b.WriteString("- stop needs no approval and always runs: call it at once if anything looks unsafe.\n")
	b.WriteString("- Never show the user error types, codes, JSON, ids of tool calls or stack traces: say in plain words what happened and what you will do.\n\n")
	b.WriteString("What each error type asks of you:\n")
	for _, t := range toolerr.Types() {
		retry := "do not retry it unchanged"
		if toolerr.InfoOf(t).Retryable {
			retry = "retryable"
		}
		fmt.Fprintf(&b, "- %s (%s): %s.\n", t, retry, toolerr.InfoOf(t).Suggestion)
	}
	if extra = strings.TrimSpace(extra); extra != "" {
		b.WriteString("\n" + extra + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
