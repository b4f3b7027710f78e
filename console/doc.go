// Package console is the operator's web console: one embedded page
// (plain HTML, CSS and JavaScript under static/, served with go:embed, no
// build step and nothing fetched from elsewhere at run time) plus the small
// server side it needs.
//
// The server side does three things and decides nothing itself. It signs
// the operator in: the operator token, given once in a form, is exchanged
// for a server-side session whose random id lives in an HttpOnly,
// SameSite=Strict cookie scoped to /console/, so the token never reaches
// JavaScript. It guards every state-changing console request with a
// per-session CSRF token sent in a header (compared in constant time) and
// refuses cross-origin requests. And it forwards the page's calls
// (/console/api/approvals/…, /grants/…, /estop…, /faults/clear,
// /tasks/{id}/cancel, /cluster…) to the bridge's /v1/ operator API as the
// operator, so approvals, grants, the e-stop latch, task cancellation and
// the takeover of a dead bridge's robots run through exactly the code an
// API client reaches.
//
// When several bridges share one fleet (GET /console/api/cluster says
// enabled), the page shows a Bridges panel: each bridge, alive or how long
// it has been silent, and every robot by the bridge that holds its lease.
// Robots whose bridge went silent are an alarm; taking them over is one
// button per dead bridge (or per robot) and a confirmation that says what
// happens and shows whether each robot reports itself at rest.
//
// The live view is a Server-Sent Events stream of the bridge's event bus
// (events.Bus): the same stream serves GET /v1/events for API clients with
// the operator token and /console/api/events for the page. Every stream
// starts with a hello snapshot of the current state, so a client that
// reconnects after being dropped for falling behind sees the present, not a
// gap. The audit trail comes from Conf.Audit; until the durable store
// provides one, a Ring keeps the most recent bus events in memory.
package console
