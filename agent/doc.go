// Package agent is the reference agent loop of robot-bridge: a small,
// readable chat loop that lets a language model behind an OpenAI-compatible
// /v1/chat/completions endpoint (a hosted model, llama.cpp, vLLM, Ollama)
// or Anthropic's Messages API operate the robot through the bridge, and
// handles the failures of a loop around tools the way docs/DESIGN.md asks.
//
// One user turn (Agent.Turn) goes: fetch the tools from the bridge in the
// model's format (GET /v1/tools?format=…, plus the native list for each
// tool's kind) → ask the model → send its tool calls, with the model's own
// ids, through POST /v1/tool_calls → append the returned role:"tool"
// messages in order → when an action left a task running, wait on the
// agent event stream (GET /v1/agent/events, opened before the calls are
// sent, so no transition is missed) until every such task ends, then give
// the model one compact task update → repeat until the model answers
// without tool calls or a limit ends the turn.
//
// The task update is a user-role message whose content is a JSON object
// of "type": "task_update" that says it comes from the loop, not the user:
// the tool messages already answered each tool_call id exactly once (as
// OpenAI and Anthropic require), a system message in mid-conversation
// breaks many local chat templates, and a made-up get_task call would put
// words in the model's mouth.
//
// The loop never retries a tool call: a call the bridge did not answer
// ends the turn (whether it ran is unknown), and only the model's call to
// the language model itself is retried, on 429 and 5xx, a bounded number
// of times. The loop also does not forward blindly an action the model
// repeats within a turn (see gate.go): an action tool call (kind action in
// the bridge's tool list; stop and cancel_task always pass) with the same
// tool and canonical arguments as an earlier one of the turn is answered
// by the loop itself, marked "not_sent": true, when that earlier call
// failed with retryable false, when its task ended other than succeeded
// (denied, failed mid-motion, recovered, timed out …), when it succeeded
// and no other action succeeded since (it would only do the same again),
// or when it is in the same batch. A retryable failure (ROBOT_BUSY,
// UNAVAILABLE, RATE_LIMITED) may be sent again, once its retry_after_ms
// has passed. The bridge's own idempotency (each call id is its key) and
// loop guard are the backstop.
//
// A turn ends with an answer of the model, or with an honest answer the
// loop writes itself (what worked, what could not be obtained and why the
// turn ended, in plain words, never an error code) when a limit ends it:
// Limits.MaxIterations model calls, the same call signature failing
// Limits.MaxSameFailure times in a row, LOOP_DETECTED from the bridge (at once),
// the wall-clock Limits.TurnTimeout, or a bridge or model that cannot be
// reached. A tool result longer than Limits.MaxResultBytes reaches the
// model as a valid JSON summary of its envelope (see budget.go), never
// cut mid-JSON.
package agent
