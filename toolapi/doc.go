// Package toolapi is robot-bridge's front door for LLM agents: the tool
// registry built from a robot's hw-config (state tools that only read,
// action tools that move the robot), JSON Schema validation of every
// argument, the result envelope with the closed error taxonomy of package
// toolerr, asynchronous tasks with long polling, Stripe-style idempotency
// keys (a tool call's id is one by default), a per-session loop guard and rate limit, bearer-token auth with
// agent and operator roles, and the HTTP (and MCP) front ends that share one
// call path, (*Server).Call.
//
// Tool failures are the normal case for an agent, so every call — whatever
// goes wrong, including a malformed body or an argument string wrapped in
// prose — ends in an Envelope the model can act on: what went wrong,
// whether retrying can help, what to do instead, and the robot's physical
// state in words. The package never talks to a transport: it consumes the
// small interfaces Tasks, RobotState, Scene and Safety, which the lead wires
// to the action runner, the state cache, perception and the supervisor.
package toolapi
