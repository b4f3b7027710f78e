// Package escalation is the operator hand-off (docs/DESIGN.md §3.2): an
// agent that is stuck asks an operator for help with the
// request_operator_help tool, and the bridge asks by itself when a fault
// latches during an agent's task or a session hits LOOP_DETECTED. Each
// escalation carries the session's recent tool calls and errors, so the
// operator sees what the agent saw. An escalation is open until an
// operator answers it in the console; the answer is published on the
// event bus (the agent's event stream carries it to the credential that
// owns it) and handed once to the session's next tool result, which
// closes it. Every change is committed to the Store before it takes
// effect, and the store audits it.
package escalation
