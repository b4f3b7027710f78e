// Package metrics holds robot-bridge's Prometheus metrics that are fed
// from the task runner, the safety supervisor, the approval store and the
// robot link: tasks by state, approval wait, safety events, stop latency,
// link state, and the store's health. The tool-call metrics live with the
// tool API that counts them (robot_bridge_tool_calls_total,
// robot_bridge_tool_call_duration_seconds, robot_bridge_breaker_state).
//
// There is no global registry: New registers on the Registerer it is given,
// so each bridge (and each test) has its own. Every label value comes from
// a closed set — task states, safety event kinds, approval outcomes, store
// operations — never an id or free text, so the number of series is
// bounded.
package metrics
