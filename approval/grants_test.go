package approval

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestScopedGrant_Bounds(t *testing.T) {
	square := [][]float64{{0, 0}, {2, 0}, {2, 2}, {0, 2}}
	for _, tc := range []struct {
		name  string
		scope Scope
		tool  string
		args  map[string]any
		bound string // "" when inside
	}{
		{"arm: granted pose", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, ToolMoveArm, map[string]any{"pose": "ready"}, ""},
		{"arm: other pose", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, ToolMoveArm, map[string]any{"pose": "reach_table"}, "pose"},
		{"arm: joints", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, ToolMoveArm, map[string]any{"joints": map[string]any{"elbow": 0.0}}, "joints"},
		{"arm: no pose", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, ToolMoveArm, map[string]any{}, "pose"},
		{"base: inside region", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"x": 1.0, "y": 1.5, "theta_deg": 90.0}, ""},
		{"base: on the edge", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, moveBase(2, 1), ""},
		{"base: outside region", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, moveBase(2.5, 1), "region"},
		{"base: rect", Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: -1, MinY: -1, MaxX: 1, MaxY: 1}}, ToolMoveBase, moveBase(-0.5, 0.5), ""},
		{"base: outside rect", Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: -1, MinY: -1, MaxX: 1, MaxY: 1}}, ToolMoveBase, moveBase(-0.5, 1.5), "region"},
		{"base: location inside", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"location": "table"}, ""},
		{"base: location outside", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"location": "dock"}, "region"},
		{"base: unknown location", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"location": "attic"}, "location"},
		{"base: location inside but x outside", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"location": "table", "x": 9.0, "y": 0.0}, "region"},
		{"base: no target", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"theta_deg": 3.0}, "region"},
		{"base: integer args", Scope{Tool: ToolMoveBase, Region: square}, ToolMoveBase, map[string]any{"x": 1, "y": int64(1)}, ""},
		{"grasp: granted object", Scope{Tool: ToolGrasp, Objects: []string{"red_cup"}}, ToolGrasp, map[string]any{"object_id": "red_cup"}, ""},
		{"grasp: other object", Scope{Tool: ToolGrasp, Objects: []string{"red_cup"}}, ToolGrasp, map[string]any{"object_id": "blue_bottle"}, "object"},
		{"grasp: granted label", Scope{Tool: ToolGrasp, Labels: []string{"bottle"}}, ToolGrasp, map[string]any{"object_id": "blue_bottle"}, ""},
		{"grasp: other label", Scope{Tool: ToolGrasp, Labels: []string{"bottle"}}, ToolGrasp, map[string]any{"object_id": "red_cup"}, "object"},
		{"grasp: unknown object with labels", Scope{Tool: ToolGrasp, Labels: []string{"bottle"}}, ToolGrasp, map[string]any{"object_id": "ghost"}, "object"},
		{"grasp: any object", Scope{Tool: ToolGrasp}, ToolGrasp, map[string]any{"object_id": "box"}, ""},
		{"release: tool only", Scope{Tool: ToolRelease}, ToolRelease, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a scoped grant
			f := newFixture(t)
			g, err := f.svc.CreateGrant(context.Background(), "alice", tc.scope, 5*time.Minute)
			require.NoError(t, err)

			// When a call uses it
			err = f.svc.Authorize(f.use(g.ID, "task-1", tc.tool, tc.args))

			// Then it passes only inside the bounds, and a refusal names the bound
			if tc.bound == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, safety.ErrNotAuthorized)
			var re *RefusalError
			require.ErrorAs(t, err, &re)
			require.Equal(t, CauseOutsideBounds, re.Cause)
			require.Equal(t, tc.bound, re.Bound, err.Error())
			require.Equal(t, g.ID, re.GrantID)
		})
	}
}

// fakeObjects is a hand-written actions.Objects.
type fakeObjects struct {
	lookup func(ctx context.Context, id string) (actions.ObjectInfo, error)
}

func (f fakeObjects) Lookup(ctx context.Context, id string) (actions.ObjectInfo, error) {
	return f.lookup(ctx, id)
}

func TestScopedGrant_LabelsResolveThroughPerception(t *testing.T) {
	// Given perception that knows a mug the config does not
	f := newFixture(t, func(c *Conf) {
		c.Objects = fakeObjects{lookup: func(_ context.Context, id string) (actions.ObjectInfo, error) {
			if id == "mug_7" {
				return actions.ObjectInfo{ID: id, Label: "cup"}, nil
			}
			return actions.ObjectInfo{}, toolerr.New(toolerr.NotFound, "unknown object %q", id)
		}}
	})
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolGrasp, Labels: []string{"cup"}}, time.Minute)
	require.NoError(t, err)

	// When / Then the mug is a cup, the config's red_cup still is, the box is not
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "t", ToolGrasp, map[string]any{"object_id": "mug_7"})))
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "t", ToolGrasp, map[string]any{"object_id": "red_cup"})))
	require.ErrorContains(t, f.svc.Authorize(f.use(g.ID, "t", ToolGrasp, map[string]any{"object_id": "box"})), `object "box" (a box) is not covered`)
}

func TestScopedGrant_ExpiresAfterTTL(t *testing.T) {
	// Given a 5-minute grant for a region and a subscriber
	f := newFixture(t)
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: 0, MinY: 0, MaxX: 2, MaxY: 2}}, 5*time.Minute)
	require.NoError(t, err)
	events, stop := f.svc.Subscribe()
	defer stop()
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1))))

	// When the TTL passes
	f.clock.Advance(5 * time.Minute)

	// Then a new task is refused as expired, so is the one that started in
	// time (a scoped grant's time limit ends its motions), and the expiry
	// is announced
	err = f.svc.Authorize(f.use(g.ID, "task-2", ToolMoveBase, moveBase(1, 1)))
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseExpired, re.Cause)
	require.ErrorIs(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1))), safety.ErrGrantExpired)
	ev := <-events // the expiry timer runs on its own goroutine; wait for it
	require.Equal(t, EventGrantExpired, ev.Type)
	require.Equal(t, GrantExpired, ev.Grant.Status)
	require.Empty(t, f.svc.Grants())

	// And a new request is no longer covered by it
	_, ch := f.request(t, "task-3", ToolMoveBase, moveBase(1, 1))
	select {
	case d := <-ch:
		t.Fatalf("expired grant approved a request: %+v", d)
	default:
	}
}

func TestRevoke_TakesEffectForTheVeryNextCall(t *testing.T) {
	// Given a scoped grant a task is using
	f := newFixture(t)
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, 10*time.Minute)
	require.NoError(t, err)
	u := f.use(g.ID, "task-1", ToolMoveArm, map[string]any{"pose": "ready"})
	require.NoError(t, f.svc.Authorize(u))
	events, stop := f.svc.Subscribe()
	defer stop()

	// When an operator revokes it
	rg, err := f.svc.Revoke(context.Background(), g.ID, "bob")
	require.NoError(t, err)

	// Then the very next call is refused, with no time passing, and the
	// revocation is recorded, listed and announced
	err = f.svc.Authorize(u)
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseRevoked, re.Cause)
	require.Equal(t, GrantRevoked, rg.Status)
	require.Equal(t, "bob", rg.RevokedBy)
	require.Equal(t, t0, *rg.RevokedAt)
	require.Empty(t, f.svc.Grants())
	require.Equal(t, EventGrantRevoked, nextEvent(t, events).Type)
	_, ch := f.request(t, "task-2", ToolMoveArm, map[string]any{"pose": "ready"})
	select {
	case d := <-ch:
		t.Fatalf("revoked grant approved a request: %+v", d)
	default:
	}

	// And revoking again is an error naming who did it first
	_, err = f.svc.Revoke(context.Background(), g.ID, "carol")
	require.ErrorIs(t, err, ErrNotPending)
	require.ErrorContains(t, err, "already revoked by bob")
}

func TestCreateGrant_Validation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope Scope
		ttl   time.Duration
		field string
		msg   string
	}{
		{"no tool", Scope{}, time.Minute, "scope.tool", "required"},
		{"unknown tool", Scope{Tool: "dance"}, time.Minute, "scope.tool", `unknown tool "dance"`},
		{"tool needing no approval", Scope{Tool: "stop"}, time.Minute, "scope.tool", "needs no approval"},
		{"arm without poses", Scope{Tool: ToolMoveArm}, time.Minute, "scope.poses", "required for move_arm_to"},
		{"unknown pose", Scope{Tool: ToolMoveArm, Poses: []string{"ready", "wave"}}, time.Minute, "scope.poses[1]", `unknown pose "wave" (allowed: reach_table, ready, stowed)`},
		{"blank pose", Scope{Tool: ToolMoveArm, Poses: []string{" "}}, time.Minute, "scope.poses[0]", "non-empty"},
		{"base without region", Scope{Tool: ToolMoveBase}, time.Minute, "scope.region", "required for move_base_to"},
		{"region and rect", Scope{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {1, 0}, {0, 1}}, Rect: &Rect{MaxX: 1, MaxY: 1}}, time.Minute, "scope.rect", "not both"},
		{"two vertices", Scope{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {1, 0}}}, time.Minute, "scope.region", "at least 3"},
		{"vertex of three numbers", Scope{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {1, 0, 5}, {0, 1}}}, time.Minute, "scope.region[1]", "got 3 numbers"},
		{"flat polygon", Scope{Tool: ToolMoveBase, Region: [][]float64{{0, 0}, {1, 1}, {2, 2}}}, time.Minute, "scope.region", "no area"},
		{"empty rect", Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: 1, MaxX: 1, MaxY: 1}}, time.Minute, "scope.rect", "min_x (1) must be less than max_x (1)"},
		{"poses on base", Scope{Tool: ToolMoveBase, Poses: []string{"ready"}}, time.Minute, "scope.poses", "does not apply to move_base_to"},
		{"region on release", Scope{Tool: ToolRelease, Region: [][]float64{{0, 0}}}, time.Minute, "scope.region", "does not apply to release"},
		{"labels on arm", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}, Labels: []string{"cup"}}, time.Minute, "scope.labels", "only to grasp"},
		{"zero ttl", Scope{Tool: ToolRelease}, 0, "ttl", "required"},
		{"ttl beyond max", Scope{Tool: ToolRelease}, 31 * time.Minute, "ttl", "longer than this robot's max_grant_ttl of 30m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.svc.CreateGrant(context.Background(), "alice", tc.scope, tc.ttl)
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, tc.field, ie.Field)
			require.Contains(t, ie.Problem, tc.msg)
			require.Empty(t, f.svc.Grants())
		})
	}
}

func TestCreateGrant_NormalisesScope(t *testing.T) {
	f := newFixture(t)
	g, err := f.svc.CreateGrant(context.Background(), "alice",
		Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: 0, MinY: 0, MaxX: 2, MaxY: 1}}, 30*time.Minute)
	require.NoError(t, err)
	require.Nil(t, g.Scope.Rect)
	require.Equal(t, [][]float64{{0, 0}, {2, 0}, {2, 1}, {0, 1}}, g.Scope.Region)
	require.Equal(t, "move_base_to targets with x in [0, 2], y in [0, 1]", g.Description)
	require.Equal(t, GrantActive, g.Status)

	g, err = f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolMoveArm, Poses: []string{"stowed", "ready", "stowed"}}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{"ready", "stowed"}, g.Scope.Poses)
}

// TestRevoke_CallsGrantEndedWithOperatorAndReason is the regression test
// for a revoked grant whose running motion went on: nothing told the
// supervisor, which only learnt of it at its next Authorize (if any), and
// the operator's reason was lost.
func TestRevoke_CallsGrantEndedWithOperatorAndReason(t *testing.T) {
	// Given a task moving on a scoped grant, and a store
	st := &recStore{}
	var timers *syncTimers
	f, ends := newEndFixture(t, func(c *Conf) { c.Store = st }, withSyncTimers(&timers))
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, 10*time.Minute)
	require.NoError(t, err)
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveArm, map[string]any{"pose": "ready"})))

	// When bob revokes it, saying why
	rg, err := f.svc.RevokeWith(context.Background(), g.ID, "bob", RevokeOptions{Reason: "a person is at the table"})
	require.NoError(t, err)

	// Then before Revoke returned the hook was told who and why, with no
	// lock held, and the reason is recorded on the grant and in the store
	require.Equal(t, []GrantEnd{{GrantID: g.ID, RobotID: f.cfg.Robot.ID, By: "bob", Reason: "a person is at the table"}}, ends.all(t))
	require.Equal(t, "a person is at the table", rg.RevokeReason)
	stored := st.grants[len(st.grants)-1]
	require.Equal(t, GrantRevoked, stored.Status)
	require.Equal(t, "a person is at the table", stored.RevokeReason)

	// And the grant's TTL passing later announces nothing more
	f.clock.Advance(10 * time.Minute)
	require.Zero(t, timers.fireDue(), "a revoked grant's timer is stopped")
	require.Len(t, ends.all(t), 1)
}

func TestRevoke_ReasonIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name, by, reason, field string
	}{
		{"reason too long", "bob", string(make([]byte, MaxReasonLen+1)), "reason"},
		{"invalid utf-8", "bob", "\xff", "reason"},
		{"no operator", "", "why", "by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given an active grant
			f, ends := newEndFixture(t)
			g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolRelease}, time.Minute)
			require.NoError(t, err)

			// When it is revoked with a bad reason or no operator
			_, err = f.svc.RevokeWith(context.Background(), g.ID, tc.by, RevokeOptions{Reason: tc.reason})

			// Then nothing changes
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
			require.Len(t, f.svc.Grants(), 1)
			require.Empty(t, ends.all(t))
		})
	}
}

// TestGrantEnded_ScopedGrantTTLFiringEndsItsMotions is the regression test
// for a scoped grant's expiry not reaching the supervisor: its timer only
// announced an event, and the motion running on it went on.
func TestGrantEnded_ScopedGrantTTLFiringEndsItsMotions(t *testing.T) {
	// Given a task moving on a 5-minute scoped grant
	var timers *syncTimers
	f, ends := newEndFixture(t, withSyncTimers(&timers))
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolRelease}, 5*time.Minute)
	require.NoError(t, err)
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolRelease, nil)))

	// When its TTL timer fires
	f.clock.Advance(5 * time.Minute)
	require.Equal(t, 1, timers.fireDue())

	// Then the hook is told it expired, once, with no lock held
	require.Equal(t, []GrantEnd{{
		GrantID: g.ID, RobotID: f.cfg.Robot.ID, By: SystemActor, Expired: true,
		Reason: "its time limit ran out at 12:05:00 UTC",
	}}, ends.all(t))

	// And revoking the dead grant afterwards announces no second end
	_, err = f.svc.Revoke(context.Background(), g.ID, "bob")
	require.NoError(t, err)
	require.Len(t, ends.all(t), 1)
}

// TestGrantEnded_OnceGrantTTL is the regression test for the approve-once
// side of the expiry decision: the TTL of an approve-once grant bounds when
// its one motion may start, so its timer ends the grant only if the motion
// has not started; a started one is ended by a revoke, not by the clock.
func TestGrantEnded_OnceGrantTTL(t *testing.T) {
	args := moveBase(1, 2)
	for _, tc := range []struct {
		name      string
		started   bool
		wantEnded bool
	}{
		{"task never started: the expiry ends it", false, true},
		{"task started: its motion may finish", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given an approve-once grant, whose task maybe started
			var timers *syncTimers
			f, ends := newEndFixture(t, withSyncTimers(&timers))
			id, ch := f.request(t, "task-1", ToolMoveBase, args)
			_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
			require.NoError(t, err)
			g := decision(t, ch).GrantID
			if tc.started {
				require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))
			}

			// When its TTL timer fires (the approval TTL, 1m)
			f.clock.Advance(time.Minute)
			require.Equal(t, 1, timers.fireDue())

			// Then it ended only if nothing had started on it
			err = f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args))
			if tc.wantEnded {
				require.Equal(t, []GrantEnd{{
					GrantID: g, RobotID: f.cfg.Robot.ID, By: SystemActor, Expired: true,
					Reason: "its time limit ran out at 12:01:00 UTC",
				}}, ends.all(t))
				require.ErrorIs(t, err, safety.ErrGrantExpired)
				return
			}
			require.Empty(t, ends.all(t))
			require.NoError(t, err, "the started motion may finish")

			// And a revoke still ends it, at once
			_, err = f.svc.RevokeWith(context.Background(), g, "bob", RevokeOptions{Reason: "stop that"})
			require.NoError(t, err)
			require.Equal(t, []GrantEnd{{GrantID: g, RobotID: f.cfg.Robot.ID, By: "bob", Reason: "stop that"}}, ends.all(t))
			require.ErrorIs(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)), safety.ErrGrantRevoked)
		})
	}
}

// TestGrantEnded_OnceGrantEndedByItsTimerCannotStartLate is the
// regression test for a start racing the expiry timer: once the timer has
// announced the unstarted grant ended, a command stamped a moment before
// the expiry (the supervisor's clock lags) must not start on it.
func TestGrantEnded_OnceGrantEndedByItsTimerCannotStartLate(t *testing.T) {
	// Given an approve-once grant whose TTL timer fired with no task started
	args := moveBase(1, 2)
	var timers *syncTimers
	f, ends := newEndFixture(t, withSyncTimers(&timers))
	id, ch := f.request(t, "task-1", ToolMoveBase, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	g := decision(t, ch).GrantID
	late := f.use(g, "task-1", ToolMoveBase, args) // stamped at the approval
	f.clock.Advance(time.Minute)
	require.Equal(t, 1, timers.fireDue())
	require.Len(t, ends.all(t), 1)

	// When the task's first command arrives stamped before the expiry
	err = f.svc.Authorize(late)

	// Then it is refused: what was announced ended stays ended
	require.ErrorIs(t, err, safety.ErrGrantExpired)
}
