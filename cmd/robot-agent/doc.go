// Command robot-agent is the reference agent of robot-bridge: the agent
// loop of package agent against an OpenAI-compatible chat completions
// endpoint (or Anthropic's Messages API), talking to a running bridge with
// the agent token. "robot-agent chat" is an interactive terminal session
// that shows what the agent does — tool calls, approvals it waits for,
// task progress as a bar — in plain text that works without a TTY;
// "robot-agent run PROMPT" runs one turn and exits 0 on the model's
// answer and 3 when a limit ended the turn.
package main
