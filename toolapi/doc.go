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
//
// # Fleets
//
// One Server serves one robot (Conf.Tasks, Robot, Scene and Safety) or a
// fleet of robots of one kind (Conf.Fleet: each robot's FleetRobot has its
// own backends). The robots share Conf.HWConfig's tools, named locations
// and poses, so there is one Registry (NewFleetRegistry). Every tool takes
// robot_id:
//
//   - With one robot it is optional, and must be that robot's id when
//     given; nothing else changes.
//   - With more it is required by every tool but stop, request_operator_help
//     and list_robots. A call that leaves it out, or names a robot that is
//     not one of them, is INVALID_PARAMS naming up to 20 robot ids ("… and
//     K more: call list_robots"), with the ids in details.robot_ids, and
//     reaches no robot. Up to MaxRobotEnum robots the schemas list the ids
//     in an enum; above that the property's description says to call
//     list_robots, so that the schemas stay small for a thousand robots.
//
// A call is routed to its robot's backends: state tools read it, actions
// go to its runner (without robot_id among the runner's arguments: each
// runner is its robot's), get_task and cancel_task ask its runner (a task
// of another robot is NOT_FOUND there; GET /v1/tasks/{id} and its cancel
// take ?robot_id=), and the envelope's robot field describes it. The
// idempotency hash and the loop guard see robot_id, so one key used for
// two robots is a CONFLICT. stop without robot_id stops every robot at
// once (one Tasks.Stop per robot, concurrently) and answers one envelope
// that says how many were stopped; a robot whose stop failed makes the
// call fail, naming it, with the others reported stopped. list_robots is
// a state tool that lists every robot (or only those with an alarm: a
// latched e-stop or fault, a link down, a state that is not current) with
// its condition, latches and busy task; an envelope of a call that named
// no robot describes the fleet in counts.
//
// Over MCP a fleet's robots are resource templates,
// robot://{robot_id}/state, robot://{robot_id}/scene and
// robot://{robot_id}/tasks/{id}; the one-robot URIs (robot://state, …)
// stay those of a one-robot bridge. The agent event stream of a fleet names
// the robot of every state and task event and begins with a hello that
// lists the robots; ?robot_id= follows one robot.
package toolapi
