package approval

import (
	"fmt"
	"time"

	"github.com/robot-bridge/robot-bridge/safety"
)

// Authorize implements safety.Grants: it returns nil only when u.GrantID
// names a grant that is not revoked, is for u.RobotID and u.Tool, and
// either
//
//   - is an approve-once grant for exactly u.ArgsHash, bound to u.TaskID
//     (the first task that uses it, unless the approval named its task),
//     and not expired — unless that task already started on it: an
//     approve-once grant authorizes one specific motion, so its TTL only
//     bounds when that motion may start, and once started only a revoke
//     (or delete) or an e-stop ends it; or
//   - is a scoped grant whose bounds contain u.Args and which has not
//     expired. A scoped grant is a time-limited permission, so its expiry
//     ends the motions running on it too: a task that started on it while
//     it was valid is refused from the first control period past its TTL.
//
// Every refusal is a *RefusalError wrapping safety.ErrNotAuthorized that
// says why: unknown grant, other robot, other tool, other arguments,
// revoked (naming who, and their reason), expired, bound to another task,
// or which bound the call falls outside of. A revoked grant's refusal also
// matches safety.ErrGrantRevoked, an expired one's safety.ErrGrantExpired,
// so the supervisor can tell the agent which ended its motion. A
// revocation takes effect for the very next call.
//
// The supervisor asks again every control period during a motion, with
// the same Use each time. For a task already bound to the grant by that
// same call the answer is idempotent and cheap: one read lock and a few
// comparisons, no bounds check and no write.
//
// Authorize does no I/O (a grasp scope bounded by labels may ask
// Conf.Objects for an object's label, but only on a call's first pass) and
// takes no lock the Store waits on.
func (s *Service) Authorize(u safety.Use) error {
	if u.GrantID == "" {
		return &RefusalError{Cause: CauseNoGrant, Detail: "the task holds no grant; an operator must approve the call first"}
	}
	now := u.Now
	if now.IsZero() {
		now = s.clock.Now()
	}
	if u.ArgsHash == "" {
		u.ArgsHash = safety.ArgsHash(u.Tool, u.Args)
	}

	// Check everything but the bounds under the read lock; a task already
	// bound by this call is done here. Otherwise check the bounds without a
	// lock (they are immutable, and a label lookup calls out), then check
	// again and bind the task under the write lock, so a revocation between
	// the two is still seen.
	s.mu.RLock()
	g := s.grants[u.GrantID]
	var (
		err   *RefusalError
		bound bool
	)
	if g == nil {
		err = &RefusalError{GrantID: u.GrantID, Cause: CauseUnknownGrant, Detail: "no such grant (it never existed, or was forgotten long after it ended)"}
	} else {
		bound, err = s.check(g, u, now)
	}
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	if bound {
		return nil
	}
	if g.b != nil {
		if err := g.b.contains(u.Args, g.rb.labelOf); err != nil {
			err.GrantID = u.GrantID
			return err
		}
	}
	s.mu.Lock()
	if _, err := s.check(g, u, now); err != nil {
		s.mu.Unlock()
		return err
	}
	var used *Grant
	if g.b == nil {
		if !g.started {
			g.boundTask, g.started = u.TaskID, true
			snap := g.snapshot(now)
			used = &snap
		}
	} else if u.TaskID != "" {
		g.tasks[u.TaskID] = u.ArgsHash
	}
	s.mu.Unlock()
	// The grant is used from its task's start: say so at once, so a list
	// of active grants (the console's) drops it. The hub never blocks.
	if used != nil {
		s.publish(Event{Type: EventGrantUsed, Time: now, Grant: used})
	}
	return nil
}

// check applies every rule but the bounds. It reports whether u's task is
// already bound to g by this very call (then nothing needs checking or
// writing). Caller holds mu.
func (s *Service) check(g *grant, u safety.Use, now time.Time) (bool, *RefusalError) {
	refuse := func(c RefusalCause, format string, a ...any) *RefusalError {
		return &RefusalError{GrantID: g.snap.ID, Cause: c, Detail: fmt.Sprintf(format, a...)}
	}
	sn := &g.snap
	switch {
	case sn.RevokedAt != nil:
		r := refuse(CauseRevoked, "%s revoked the grant at %s", operatorName(sn.RevokedBy), clockTime(*sn.RevokedAt))
		r.By, r.Reason = sn.RevokedBy, sn.RevokeReason
		if sn.RevokeReason != "" {
			r.Detail += "; their reason: " + sn.RevokeReason
		}
		return false, r
	case sn.RobotID != u.RobotID:
		return false, refuse(CauseOtherRobot, "the grant is for robot %q, not %q", sn.RobotID, u.RobotID)
	case sn.Tool != u.Tool:
		return false, refuse(CauseOtherTool, "the grant is for %s, not %s", sn.Tool, u.Tool)
	}
	expired := !now.Before(sn.ExpiresAt)
	if g.b == nil { // approve once
		if sn.ArgsHash != u.ArgsHash {
			return false, refuse(CauseOtherArgs, "the operator approved %s with other arguments; a new call needs its own approval", sn.Tool)
		}
		if u.TaskID == "" {
			return false, refuse(CauseNoTask, "an approve-once grant is used by one task, and the command names none")
		}
		if g.boundTask != "" && g.boundTask != u.TaskID {
			return false, refuse(CauseOtherTask, "the grant belongs to task %s, not %s; it authorizes one task only", g.boundTask, u.TaskID)
		}
		// ended without a revocation: the TTL timer found it unstarted.
		if g.ended || (expired && !g.started) {
			return false, refuse(CauseExpired, "the approval expired at %s before the task started", clockTime(sn.ExpiresAt))
		}
		return g.started, nil
	}
	if expired || g.ended {
		return false, refuse(CauseExpired, "the scoped grant expired at %s; its time limit also ends the motions running on it", clockTime(sn.ExpiresAt))
	}
	h, ok := g.tasks[u.TaskID]
	return ok && u.TaskID != "" && h == u.ArgsHash, nil
}
