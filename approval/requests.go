package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// waiter is a pending request's decision channel and expiry timer.
type waiter struct {
	ch    chan actions.Decision
	timer clockwork.Timer
}

// Request implements actions.Approver. It files a pending request, or — when
// an active scoped grant of the same robot covers the call — records it as
// approved by that grant and delivers the approval at once. While the
// robot's Latched reports an e-stop or a fault, nothing is filed or
// approved and its error is returned. r.RobotID must be one of the
// service's robots; it may be empty only when there is one. Errors are
// *toolerr.Error.
func (s *Service) Request(ctx context.Context, r actions.ApprovalRequest) (string, <-chan actions.Decision, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "the approval request was abandoned: %v", err).Wrap(err)
	}
	if strings.TrimSpace(r.Tool) == "" {
		return "", nil, toolerr.New(toolerr.Internal, "approval request without a tool name").Wrap(ErrInvalid)
	}
	rb, err := s.requestRobot(r.RobotID)
	if err != nil {
		return "", nil, err
	}
	r.RobotID = rb.id
	args := cloneArgs(r.Arguments)
	hash := safety.ArgsHash(r.Tool, args)
	if r.ArgsHash != "" && r.ArgsHash != hash {
		return "", nil, toolerr.New(toolerr.Internal, "approval request's args hash does not match its arguments").Wrap(ErrInvalid)
	}
	preview := r.Preview
	if strings.TrimSpace(preview) == "" {
		preview = fmt.Sprintf("call %s", r.Tool)
	}
	var target *robot.Pose2D
	if r.Target != nil {
		t := *r.Target
		target = &t
	}

	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return "", nil, toolerr.New(toolerr.Unavailable, "the approval service is shutting down").Wrap(ErrClosed)
	}
	if err := rb.latchedLocked(); err != nil {
		s.log.Info("approval request refused: a safety latch is set", "robot_id", rb.id, "task_id", r.TaskID, "tool", r.Tool, "err", err)
		if toolerr.As(err) != nil {
			return "", nil, err
		}
		return "", nil, toolerr.New(toolerr.SafetyViolation, "no approval request was filed: %v", err).Wrap(err)
	}
	now := s.clock.Now()
	if n := s.pendingCount(rb.id, now); n >= s.maxPending {
		e := toolerr.New(toolerr.RateLimited, "%d approval requests are already waiting for an operator", n)
		if len(s.robots) > 1 {
			e = toolerr.New(toolerr.RateLimited, "%d approval requests for robot %s are already waiting for an operator", n, rb.id)
		}
		e.RetryAfter = rb.approvalTTL
		return "", nil, e
	}
	id, err := s.uniqueID("apr_")
	if err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "could not file the approval request").Wrap(err)
	}
	a := &Approval{
		ID: id, TaskID: r.TaskID, Tool: r.Tool, Arguments: args, ArgsHash: hash, RobotID: r.RobotID,
		Preview: preview, Target: target, RobotState: r.RobotState, Status: StatusPending,
		RequestedBy: r.RequestedBy, SessionID: r.SessionID, CreatedAt: now, ExpiresAt: now.Add(rb.approvalTTL),
	}
	ch := make(chan actions.Decision, 1)

	if g := s.coveringGrant(rb, r.Tool, args, now); g != nil {
		// Covered by a scoped grant: record it approved by that grant.
		a.Status = StatusApproved
		a.DecidedAt = &now
		a.DecidedBy = g.CreatedBy
		a.GrantID = g.ID
		a.Reason = fmt.Sprintf("covered by scoped grant %s (%s)", g.ID, g.Description)
		d := actions.Decision{
			Approved: true, By: g.CreatedBy, GrantID: g.ID, Reason: a.Reason,
			GrantScope: g.Description, GrantExpires: g.ExpiresAt,
		}
		if r.HoldRecord {
			// The runner writes the record in the commit that precedes
			// the task's first command (or alone, if the task ends first).
			rec := *a
			d.Held = &actions.HeldRecord{Value: rec, Save: func(ctx context.Context) error { return s.store.SaveApproval(ctx, rec) }}
		} else if err := s.store.SaveApproval(ctx, *a); err != nil {
			return "", nil, toolerr.New(toolerr.Internal, "could not record the approval request").Wrap(err)
		}
		s.insertApproval(a)
		ch <- d
		close(ch)
		s.log.Info("approval covered by scoped grant", "approval_id", id, "robot_id", rb.id, "task_id", r.TaskID, "tool", r.Tool, "grant_id", g.ID)
		created := *a
		created.Status, created.DecidedAt, created.DecidedBy, created.GrantID, created.Reason = StatusPending, nil, "", "", ""
		s.publish(Event{Type: EventApprovalCreated, Time: now, Approval: &created})
		s.publish(Event{Type: EventApprovalApproved, Time: now, Approval: a})
		return id, ch, nil
	}

	if r.BeforeFile != nil {
		r.BeforeFile()
	}
	if err := s.store.SaveApproval(ctx, *a); err != nil {
		return "", nil, toolerr.New(toolerr.Internal, "could not record the approval request").Wrap(err)
	}
	s.insertApproval(a)
	s.waiters[id] = &waiter{ch: ch, timer: s.clock.AfterFunc(rb.approvalTTL, func() { s.onApprovalTimer(id) })}
	s.log.Info("approval requested", "approval_id", id, "robot_id", rb.id, "task_id", r.TaskID, "tool", r.Tool,
		"requested_by", r.RequestedBy, "expires_at", a.ExpiresAt)
	s.publish(Event{Type: EventApprovalCreated, Time: now, Approval: a})
	return id, ch, nil
}

// requestRobot resolves an approval request's robot id: empty is the one
// robot of a one-robot service. The refusals are INTERNAL, because the
// action runner, not an operator, names the robot.
func (s *Service) requestRobot(id string) (*robotState, error) {
	if id == "" {
		if len(s.robots) == 1 {
			return s.robots[0], nil
		}
		return nil, toolerr.New(toolerr.Internal, "approval request without a robot id sent to the approval service of %d robots (%s)",
			len(s.robots), JoinRobotIDs(s.Robots())).Wrap(ErrInvalid)
	}
	if rb, ok := s.byID[id]; ok {
		return rb, nil
	}
	if len(s.robots) == 1 {
		return nil, toolerr.New(toolerr.Internal, "approval request for robot %q sent to the approval service of robot %q", id, s.robots[0].id).Wrap(ErrInvalid)
	}
	return nil, toolerr.New(toolerr.Internal, "approval request for robot %q, which is not one of the approval service's robots (%s)",
		id, JoinRobotIDs(s.Robots())).Wrap(ErrInvalid)
}

// pendingCount counts robotID's requests still pending at now. Caller
// holds decideMu.
func (s *Service) pendingCount(robotID string, now time.Time) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for id := range s.waiters {
		if a := s.approvals[id]; a != nil && a.RobotID == robotID && now.Before(a.ExpiresAt) {
			n++
		}
	}
	return n
}

// insertApproval stores a new request and forgets the oldest decided ones
// beyond History. Caller holds decideMu.
func (s *Service) insertApproval(a *Approval) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.approvals[a.ID] = a
	s.order = append(s.order, a.ID)
	if len(s.order) <= s.history {
		return
	}
	excess := len(s.order) - s.history
	kept := s.order[:0]
	for _, id := range s.order {
		if excess > 0 && !s.approvals[id].Pending() {
			delete(s.approvals, id)
			excess--
			continue
		}
		kept = append(kept, id)
	}
	s.order = kept
}

// Withdraw implements actions.Approver: the task was cancelled, so its
// pending request ends Cancelled. A request that is no longer pending is
// left as it is.
func (s *Service) Withdraw(approvalID, reason string) { s.withdrawOf("", approvalID, reason) }

// withdrawOf is Withdraw, for robotID's requests only (any robot's when
// robotID is empty).
func (s *Service) withdrawOf(robotID, approvalID, reason string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w := s.pendingLocked(approvalID)
	if a == nil {
		s.log.Debug("withdraw of a request that is not pending", "approval_id", approvalID)
		return
	}
	if robotID != "" && a.RobotID != robotID {
		s.log.Warn("withdraw of another robot's request ignored", "approval_id", approvalID, "robot_id", a.RobotID, "by_robot", robotID)
		return
	}
	if strings.TrimSpace(reason) == "" {
		reason = "the task was cancelled"
	}
	s.withdrawLocked(a, w, reason)
}

// WithdrawAll withdraws every pending request, of every task and every
// robot, as Withdraw does one: each waiter receives a Cancelled decision
// with reason, and each withdrawal is recorded (cancelled, by
// SystemActor) and announced. The supervisor's side calls it when the
// e-stop latches, so that no motion planned before the latch can be
// approved after the reset. A request already past its TTL is expired
// instead and not counted. It returns how many requests it withdrew;
// after Close it does nothing.
//
// In a fleet, one robot's e-stop must withdraw only that robot's
// requests: give each robot's runner Service.Robot(id), whose WithdrawAll
// is WithdrawRobot.
func (s *Service) WithdrawAll(reason string) int { return s.withdrawAll("", reason) }

// WithdrawRobot is WithdrawAll for one robot's pending requests: the other
// robots' stay pending. An unknown robot has none.
func (s *Service) WithdrawRobot(robotID, reason string) int {
	if robotID == "" {
		return 0
	}
	return s.withdrawAll(robotID, reason)
}

// withdrawAll withdraws robotID's pending requests, every robot's when it
// is empty.
func (s *Service) withdrawAll(robotID, reason string) int {
	if strings.TrimSpace(reason) == "" {
		reason = "every pending approval request was withdrawn"
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	if s.closed {
		return 0
	}
	n := 0
	for _, id := range slices.Clone(s.order) {
		a, w := s.pendingLocked(id)
		if a == nil || (robotID != "" && a.RobotID != robotID) {
			continue
		}
		if s.withdrawLocked(a, w, reason) {
			n++
		}
	}
	if robotID != "" {
		s.log.Info("every pending approval of the robot withdrawn", "robot_id", robotID, "count", n, "reason", reason)
		return n
	}
	s.log.Info("every pending approval withdrawn", "count", n, "reason", reason)
	return n
}

// withdrawLocked ends a pending request Cancelled with reason, or Expired
// when its TTL has already passed; it reports whether it was withdrawn.
// Like an expiry, a withdrawal is a decline: it takes effect even when the
// store fails. Caller holds decideMu.
func (s *Service) withdrawLocked(a *Approval, w *waiter, reason string) bool {
	now := s.clock.Now()
	if !now.Before(a.ExpiresAt) {
		s.expireLocked(a, w)
		return false
	}
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusCancelled, &now, SystemActor, reason
	if err := s.store.SaveApproval(context.Background(), rec); err != nil {
		s.log.Error("could not record a withdrawn approval request; withdrawing it anyway", "approval_id", a.ID, "err", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Cancelled: true, Reason: reason, By: SystemActor}, EventApprovalCancelled)
	s.log.Info("approval withdrawn", "approval_id", a.ID, "task_id", a.TaskID, "reason", reason)
	return true
}

// pendingLocked returns the request and its waiter if it is pending.
// Caller holds decideMu.
func (s *Service) pendingLocked(id string) (*Approval, *waiter) {
	w := s.waiters[id]
	if w == nil {
		return nil, nil
	}
	s.mu.RLock()
	a := s.approvals[id]
	s.mu.RUnlock()
	return a, w
}

// onApprovalTimer expires a request whose TTL has passed.
func (s *Service) onApprovalTimer(id string) {
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w := s.pendingLocked(id)
	if a == nil || s.closed {
		return
	}
	if d := a.ExpiresAt.Sub(s.clock.Now()); d > 0 {
		// A real timer never fires early, but a clock that did must not
		// shorten an operator's time to decide.
		w.timer = s.clock.AfterFunc(d, func() { s.onApprovalTimer(id) })
		return
	}
	s.expireLocked(a, w)
}

// expireLocked ends a pending request whose TTL has passed. The record says
// it was decided at its expiry time, whenever this runs, so List and Get
// can show a due request as expired before the timer fires. Caller holds
// decideMu.
func (s *Service) expireLocked(a *Approval, w *waiter) {
	rec := *a
	at := a.ExpiresAt
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusExpired, &at, SystemActor, s.expiryReason(a)
	if err := s.store.SaveApproval(context.Background(), rec); err != nil {
		s.log.Error("could not record an expired approval request; expiring it anyway", "approval_id", a.ID, "err", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Expired: true, Reason: rec.Reason, By: SystemActor}, EventApprovalExpired)
	s.log.Info("approval expired", "approval_id", a.ID, "task_id", a.TaskID, "tool", a.Tool)
}

// expiryReason says why a request expired, in its robot's approval TTL.
func (s *Service) expiryReason(a *Approval) string {
	if rb, ok := s.byID[a.RobotID]; ok {
		return rb.expiryReason()
	}
	return "no operator decided within " + robot.FormatAge(a.ExpiresAt.Sub(a.CreatedAt))
}

// finishLocked applies a final status: it replaces the record, delivers the
// one decision, closes the channel and announces the change. Caller holds
// decideMu.
func (s *Service) finishLocked(rec *Approval, w *waiter, d actions.Decision, ev EventType) {
	s.mu.Lock()
	s.approvals[rec.ID] = rec
	s.mu.Unlock()
	delete(s.waiters, rec.ID)
	w.timer.Stop()
	// Announce first, so whoever sees the decision can also see the event.
	s.publish(Event{Type: ev, Time: s.clock.Now(), Approval: rec})
	w.ch <- d
	close(w.ch)
}

// decidable returns the pending request id for an operator decision, or
// the error that explains why it cannot be decided. A request past its TTL
// is expired here and now. Caller holds decideMu.
func (s *Service) decidable(id string) (*Approval, *waiter, error) {
	if s.closed {
		return nil, nil, ErrClosed
	}
	a, w := s.pendingLocked(id)
	if a == nil {
		s.mu.RLock()
		done := s.approvals[id]
		s.mu.RUnlock()
		if done == nil {
			return nil, nil, &NotFoundError{Kind: "approval", ID: id}
		}
		return nil, nil, notPending(done)
	}
	if !s.clock.Now().Before(a.ExpiresAt) {
		s.expireLocked(a, w)
		s.mu.RLock()
		done := s.approvals[id]
		s.mu.RUnlock()
		return nil, nil, notPending(done)
	}
	return a, w, nil
}

func notPending(a *Approval) error {
	e := &NotPendingError{Kind: "approval", ID: a.ID, Status: string(a.Status), By: a.DecidedBy, Reason: a.Reason}
	if a.DecidedAt != nil {
		e.At = *a.DecidedAt
	}
	return e
}

// ApproveOptions are the optional parts of an approval.
type ApproveOptions struct {
	// Reason is the operator's note on why (optional), kept in the record.
	Reason string
	// Grant, when set, also creates a scoped grant, so that calls like this
	// one are approved without asking for the grant's TTL. Its Scope.Tool
	// defaults to the request's tool.
	Grant *GrantSpec
}

// GrantSpec is a scoped grant to create.
type GrantSpec struct {
	Scope Scope
	// TTL is the grant's lifetime, in (0, safety.max_grant_ttl].
	TTL time.Duration
}

// Approve approves a pending request once: it creates an approve-once grant
// bound to the request's tool, argument hash, robot and task, and delivers
// the approval. With opts.Grant it also creates a scoped grant. A request
// that is no longer pending gives a *NotPendingError (ErrNotPending), an
// unknown id a *NotFoundError (ErrNotFound), a bad scope or TTL an
// *InvalidError (ErrInvalid).
//
// The latches are checked at the moment of the decision, under the lock
// that decides: while the latches of the request's robot (Conf.Latched, or
// that Robot's Latched; never another robot's) report an e-stop or a
// fault, Approve
// creates no grant, withdraws the request (its task gets a Cancelled
// decision naming the latch) and returns a *LatchedError (ErrLatched).
// Withdrawn rather than left pending, because the motion was planned for
// a robot that has since been stopped: approving it after the reset would
// run a plan nobody re-checked (the operator API answers 409).
func (s *Service) Approve(ctx context.Context, id, by string, opts ApproveOptions) (Approval, error) {
	if err := checkName("by", by); err != nil {
		return Approval{}, err
	}
	if err := checkReason("reason", opts.Reason, false); err != nil {
		return Approval{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w, err := s.decidable(id)
	if err != nil {
		return Approval{}, err
	}
	rb, err := s.requestRobot(a.RobotID)
	if err != nil {
		return Approval{}, err
	}
	if lerr := rb.latchedLocked(); lerr != nil {
		s.withdrawLocked(a, w, fmt.Sprintf("withdrawn when %s tried to approve it, because a safety latch was set: %v", by, lerr))
		return Approval{}, &LatchedError{ApprovalID: a.ID, Err: lerr}
	}
	var scoped *grant
	if opts.Grant != nil {
		sc := opts.Grant.Scope
		if strings.TrimSpace(sc.Tool) == "" {
			sc.Tool = a.Tool
		}
		if scoped, err = s.newScoped(rb, sc, opts.Grant.TTL, by, "grant.scope", "grant.ttl"); err != nil {
			return Approval{}, err
		}
		scoped.snap.ApprovalID = a.ID
	}
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	now := s.clock.Now()
	onceID, err := s.uniqueID("grt_")
	if err != nil {
		return Approval{}, err
	}
	once := &grant{
		snap: Grant{
			ID: onceID, Kind: GrantOnce, Tool: a.Tool, RobotID: a.RobotID, ArgsHash: a.ArgsHash,
			ApprovalID: a.ID, CreatedBy: by, CreatedAt: now, ExpiresAt: now.Add(rb.onceTTL),
			Description: "once: " + a.Preview,
		},
		rb:        rb,
		boundTask: a.TaskID,
	}
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason, rec.GrantID = StatusApproved, &now, by, opts.Reason, onceID
	if scoped != nil {
		scoped.snap.CreatedAt, scoped.snap.ExpiresAt = now, now.Add(opts.Grant.TTL)
		if scoped.snap.ID, err = s.uniqueID("grt_"); err != nil {
			return Approval{}, err
		}
		if scoped.snap.ID == onceID {
			return Approval{}, errors.New("approval: NewID returned the same id twice in a row")
		}
		rec.ScopedGrantID = scoped.snap.ID
	}

	// Grants first: the approval record refers to them.
	if err := s.store.SaveGrant(ctx, once.snapshot(now)); err != nil {
		return Approval{}, fmt.Errorf("approval: record the grant: %w", err)
	}
	if scoped != nil {
		if err := s.store.SaveGrant(ctx, scoped.snapshot(now)); err != nil {
			return Approval{}, fmt.Errorf("approval: record the scoped grant: %w", err)
		}
	}
	if err := s.store.SaveApproval(ctx, rec); err != nil {
		return Approval{}, fmt.Errorf("approval: record the approval: %w", err)
	}
	// Snapshot before the grants become visible: once the decision is
	// delivered the task may bind them under mu at any moment.
	onceSnap := once.snapshot(now)
	var scopedSnap Grant
	if scoped != nil {
		scopedSnap = scoped.snapshot(now)
	}
	s.insertGrant(once)
	if scoped != nil {
		s.insertGrant(scoped)
	}
	s.finishLocked(&rec, w, actions.Decision{Approved: true, By: by, GrantID: onceID, Reason: opts.Reason}, EventApprovalApproved)
	s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &onceSnap})
	if scoped != nil {
		s.publish(Event{Type: EventGrantCreated, Time: now, Grant: &scopedSnap})
	}
	s.log.Info("approval approved", "approval_id", a.ID, "robot_id", a.RobotID, "task_id", a.TaskID, "tool", a.Tool, "by", by,
		"grant_id", onceID, "scoped_grant_id", rec.ScopedGrantID)
	return rec, nil
}

// Deny denies a pending request. The reason is required and reaches the
// agent verbatim in APPROVAL_DENIED.
func (s *Service) Deny(ctx context.Context, id, by, reason string) (Approval, error) {
	if err := checkName("by", by); err != nil {
		return Approval{}, err
	}
	if err := checkReason("reason", reason, true); err != nil {
		return Approval{}, err
	}
	s.decideMu.Lock()
	defer s.decideMu.Unlock()
	a, w, err := s.decidable(id)
	if err != nil {
		return Approval{}, err
	}
	if err := ctx.Err(); err != nil {
		return Approval{}, err
	}
	now := s.clock.Now()
	rec := *a
	rec.Status, rec.DecidedAt, rec.DecidedBy, rec.Reason = StatusDenied, &now, by, reason
	if err := s.store.SaveApproval(ctx, rec); err != nil {
		return Approval{}, fmt.Errorf("approval: record the denial: %w", err)
	}
	s.finishLocked(&rec, w, actions.Decision{Reason: reason, By: by}, EventApprovalDenied)
	s.log.Info("approval denied", "approval_id", a.ID, "task_id", a.TaskID, "tool", a.Tool, "by", by, "reason", reason)
	return rec, nil
}

// List returns the requests with the given status ("" for all), of every
// robot, oldest first. A pending request past its TTL is shown as expired
// even if its timer has not fired yet, exactly as it will be recorded.
func (s *Service) List(status string) []Approval { return s.ListRobot(status, "") }

// ListRobot is List for one robot's requests ("" for every robot's). An
// unknown robot has none; see CheckRobotFilter.
func (s *Service) ListRobot(status, robotID string) []Approval {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Approval, 0, len(s.approvals))
	for _, a := range s.approvals {
		if robotID != "" && a.RobotID != robotID {
			continue
		}
		v := s.view(a, now)
		if status == "" || string(v.Status) == status {
			out = append(out, v)
		}
	}
	sortOldestFirst(out, func(a Approval) (time.Time, string) { return a.CreatedAt, a.ID })
	return out
}

// Get returns one request, or a *NotFoundError.
func (s *Service) Get(id string) (Approval, error) {
	now := s.clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.approvals[id]
	if a == nil {
		return Approval{}, &NotFoundError{Kind: "approval", ID: id}
	}
	return s.view(a, now), nil
}

// view is a's snapshot as of now. Caller holds mu.
func (s *Service) view(a *Approval, now time.Time) Approval {
	v := *a
	if v.Status == StatusPending && !now.Before(v.ExpiresAt) {
		at := v.ExpiresAt
		v.Status, v.DecidedAt, v.DecidedBy, v.Reason = StatusExpired, &at, SystemActor, s.expiryReason(a)
	}
	return v
}
