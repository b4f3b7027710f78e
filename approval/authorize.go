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
//     and not expired — unless that task already started on it, so a
//     motion that began in time may finish; or
//   - is a scoped grant whose bounds contain u.Args and which has not
//     expired — unless u.TaskID already started on it while it was valid.
//
// Every refusal is a *RefusalError wrapping safety.ErrNotAuthorized that
// says why: unknown grant, other robot, other tool, other arguments,
// revoked, expired, bound to another task, or which bound the call falls
// outside of. A revocation takes effect for the very next call.
//
// Authorize does no I/O (a grasp scope bounded by labels may ask
// Conf.Objects for an object's label) and takes no lock the Store waits on.
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

	// Check everything but the bounds under the read lock, then the bounds
	// without a lock (they are immutable, and a label lookup calls out),
	// then check again and bind the task under the write lock, so a
	// revocation between the two is still seen.
	s.mu.RLock()
	g := s.grants[u.GrantID]
	var err *RefusalError
	if g == nil {
		err = &RefusalError{GrantID: u.GrantID, Cause: CauseUnknownGrant, Detail: "no such grant (it never existed, or was forgotten long after it ended)"}
	} else {
		err = s.check(g, u, now, false)
	}
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	if g.b != nil {
		if err := g.b.contains(u.Args, s.labelOf); err != nil {
			err.GrantID = u.GrantID
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(g, u, now, true); err != nil {
		return err
	}
	return nil
}

// check applies every rule but the bounds; with commit it also binds the
// task. Caller holds mu (for writing when commit is set).
func (s *Service) check(g *grant, u safety.Use, now time.Time, commit bool) *RefusalError {
	refuse := func(c RefusalCause, format string, a ...any) *RefusalError {
		return &RefusalError{GrantID: g.snap.ID, Cause: c, Detail: fmt.Sprintf(format, a...)}
	}
	sn := &g.snap
	switch {
	case sn.RevokedAt != nil:
		return refuse(CauseRevoked, "revoked by %s at %s", sn.RevokedBy, sn.RevokedAt.UTC().Format(time.RFC3339))
	case sn.RobotID != u.RobotID:
		return refuse(CauseOtherRobot, "the grant is for robot %q, not %q", sn.RobotID, u.RobotID)
	case sn.Tool != u.Tool:
		return refuse(CauseOtherTool, "the grant is for %s, not %s", sn.Tool, u.Tool)
	}
	expired := !now.Before(sn.ExpiresAt)
	if g.b == nil { // approve once
		if sn.ArgsHash != u.ArgsHash {
			return refuse(CauseOtherArgs, "the operator approved %s with other arguments; a new call needs its own approval", sn.Tool)
		}
		if u.TaskID == "" {
			return refuse(CauseNoTask, "an approve-once grant is used by one task, and the command names none")
		}
		if g.boundTask != "" && g.boundTask != u.TaskID {
			return refuse(CauseOtherTask, "the grant belongs to task %s, not %s; it authorizes one task only", g.boundTask, u.TaskID)
		}
		if expired && !g.started {
			return refuse(CauseExpired, "the approval expired at %s before the task started", sn.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if commit {
			g.boundTask, g.started = u.TaskID, true
		}
		return nil
	}
	if expired {
		if _, ok := g.tasks[u.TaskID]; !ok || u.TaskID == "" {
			return refuse(CauseExpired, "the scoped grant expired at %s", sn.ExpiresAt.UTC().Format(time.RFC3339))
		}
		return nil
	}
	if commit && u.TaskID != "" {
		g.tasks[u.TaskID] = struct{}{}
	}
	return nil
}
