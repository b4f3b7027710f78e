// Package approval is the operator approval service (ARCHITECTURE.md): the
// only place where a human says yes or no to a robot motion.
//
// An action tool call that needs approval files a request with [Service.Request]
// (the service implements actions.Approver). The request waits, pending,
// until an operator approves it, denies it with a reason, or its TTL
// (hw-config safety.approval_ttl) passes, which counts as a decline; a
// cancelled task withdraws it. Each request's channel delivers exactly one
// actions.Decision and is then closed.
//
// Approving a request creates a single-use ("once") grant bound to the
// tool, the canonical hash of the arguments, the robot and an expiry; the
// first task that sends a motion on it owns it, and only that task may use
// it afterwards. An operator may also create a scoped grant — a tool plus
// bounds (named arm poses, a floor region, objects) plus a TTL capped by
// safety.max_grant_ttl — which approves matching requests at once and
// authorizes any call inside its bounds until it expires or is revoked.
// The supervisor's authorization gate asks [Service.Authorize] (the service
// implements safety.Grants) before every motion command and again every
// control period while the motion runs (cheap for a task already bound).
//
// When authority ends (ARCHITECTURE.md, invariant 11):
//
//   - Revoking a grant — [Service.Revoke], [Service.RevokeWith] with the
//     operator's reason, or DELETE /v1/grants/{id}, which is the same
//     operation: deleting a grant is revoking it — ends it for every task,
//     also one already moving on it. Authorize refuses the very next call
//     with a [RefusalError] matching safety.ErrGrantRevoked that names the
//     operator and their reason. The grant stays readable with
//     [Service.Grant] (status revoked, with revoked_by and revoke_reason)
//     and in the store's audit trail; GET /v1/grants, which lists active
//     grants, no longer shows it.
//   - A scoped grant is a time-limited permission: when its TTL runs out,
//     the motions running on it are stopped too (Authorize refuses them,
//     matching safety.ErrGrantExpired), not left to finish their step.
//   - An approve-once grant authorizes one specific motion, so its TTL only
//     bounds when that motion may start; once started, only a revoke or an
//     e-stop ends it.
//
// Each of these also calls Conf.GrantEnded (a [GrantEnd], synchronously,
// with no lock of the service held, at most once per grant), which the
// bridge wires to the supervisor so the motion holding the grant stops at
// once rather than at its next check. The TTL timer of an approve-once
// grant whose task already started does not call it.
//
// The latches (Conf.Latched, wired to the supervisor) end calls still being
// planned: while an e-stop or a fault is latched, [Service.Request] files
// nothing and returns the latch's refusal, and [Service.Approve] — which
// checks at the moment of the decision, under the lock that decides —
// refuses with a [LatchedError] and withdraws the request, since its
// motion was planned for a robot that has since been stopped (a denial is
// still accepted). When the e-stop latches, [Service.WithdrawAll] withdraws
// every pending request, not only the live task's.
//
// Every change goes through the optional [Store] before it takes effect, so
// the SQLite store can persist requests, decisions and grants, and is
// announced on [Service.Subscribe] for the console's event stream and the
// audit trail. [NewHTTPHandler] serves the operator API:
//
//	GET    /v1/approvals?status=pending&robot=r7 → {"approvals":[Approval…]}
//	GET    /v1/approvals/{id}            → {"approval":Approval}
//	POST   /v1/approvals/{id}/approve    {"reason"?, "grant"?:{"scope":Scope,"ttl":"10m"}} → {"approval":…, "grant"?:…}
//	POST   /v1/approvals/{id}/deny       {"reason":"…"} → {"approval":…}
//	GET    /v1/grants?robot=r7           → {"grants":[Grant…]} (active ones)
//	POST   /v1/grants                    {"robot_id"?, "scope":Scope,"ttl":"10m"} → 201 {"grant":Grant}
//	DELETE /v1/grants/{id}               {"reason"?} → {"grant":Grant} (revokes it)
//
// One service decides for every robot of a bridge (Conf.Robots): each
// request, approval and grant is one robot's (robot_id). A robot's
// latches refuse only its own requests and approvals, a grant authorizes
// only its own robot and its scope is checked against that robot's
// config, and [Service.Robot] gives each robot's action runner an
// approver whose withdraw-everything on an e-stop withdraws only that
// robot's requests. The lists show every robot; ?robot= (one of the
// robots, else 400) shows one. POST /v1/grants needs robot_id when the
// bridge has several robots (400 listing them otherwise); with one it is
// optional and must be that robot's id when given. A grant made along
// with an approval is for the approval's robot.
//
// Errors are {"error":{"type":…,"message":…}} with the toolerr type names:
// 400 INVALID_PARAMS, 404 NOT_FOUND, 409 CONFLICT (the request is no longer
// pending, the grant is already revoked, or an approval came while an
// e-stop or fault was latched, which withdrew the request), 413 and 415
// INVALID_PARAMS (a body too large, or not sent as application/json), 503
// UNAVAILABLE (service closed).
// The handler does no authentication: the bridge's router only lets the
// operator role reach it.
//
// For the agent's side, PendingError builds APPROVAL_PENDING (naming the
// task to poll with get_task) and DecisionError turns a denial into
// APPROVAL_DENIED carrying the operator's reason verbatim, and an expiry
// into APPROVAL_EXPIRED.
//
// The service owns no goroutine. Expiry runs on timers of the injected
// clock, and every operation also expires what is due before it acts, so a
// request past its TTL can never be approved, even if its timer has not
// fired yet.
package approval
