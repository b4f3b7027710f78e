package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
)

// TestAuthorize_ScopedGrantExpiredMidMotionRefused is the regression test
// for a scoped grant whose TTL ran out while a task moved on it: the task
// was let finish (Authorize kept saying yes to a task bound before the
// expiry), so the time limit did not stop the motion.
func TestAuthorize_ScopedGrantExpiredMidMotionRefused(t *testing.T) {
	// Given task-1 moving on a 5-minute scoped grant, checked every period
	f := newFixture(t)
	g, err := f.svc.CreateGrant(context.Background(), "alice",
		Scope{Tool: ToolMoveBase, Rect: &Rect{MinX: 0, MinY: 0, MaxX: 2, MaxY: 2}}, 5*time.Minute)
	require.NoError(t, err)
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1))))
	f.clock.Advance(5*time.Minute - time.Millisecond)
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1))), "valid until its TTL")

	// When the TTL passes mid-motion (whether or not its timer ran yet)
	f.clock.Advance(time.Millisecond)
	err = f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1)))

	// Then the very next check of that same task is refused as expired
	require.ErrorIs(t, err, safety.ErrNotAuthorized)
	require.ErrorIs(t, err, safety.ErrGrantExpired)
	require.NotErrorIs(t, err, safety.ErrGrantRevoked)
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseExpired, re.Cause)
	require.Equal(t, g.ID, re.GrantID)
	require.Contains(t, err.Error(), "expired at 12:05:00 UTC")
}

// TestAuthorize_RefusalSaysWhetherTheGrantWasRevokedOrExpired is the
// regression test for refusals the supervisor could not tell apart: every
// one was only safety.ErrNotAuthorized, so a motion stopped by a revoke
// could not say the operator revoked it.
func TestAuthorize_RefusalSaysWhetherTheGrantWasRevokedOrExpired(t *testing.T) {
	arm := map[string]any{"pose": "ready"}
	scoped := func(t *testing.T, f *fixture) string {
		g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, time.Minute)
		require.NoError(t, err)
		return g.ID
	}
	once := func(t *testing.T, f *fixture) string {
		id, ch := f.request(t, "task-1", ToolMoveArm, arm)
		_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
		require.NoError(t, err)
		return decision(t, ch).GrantID
	}
	revoke := func(t *testing.T, f *fixture, g string) {
		_, err := f.svc.Revoke(context.Background(), g, "bob")
		require.NoError(t, err)
	}
	expire := func(_ *testing.T, f *fixture, _ string) { f.clock.Advance(time.Hour) }
	for _, tc := range []struct {
		name    string
		grant   func(*testing.T, *fixture) string
		started bool // task-1 passed the gate before the change
		change  func(*testing.T, *fixture, string)
		args    map[string]any
		want    error // besides safety.ErrNotAuthorized; nil for neither sentinel
	}{
		{"scoped, revoked mid-motion", scoped, true, revoke, arm, safety.ErrGrantRevoked},
		{"scoped, revoked before use", scoped, false, revoke, arm, safety.ErrGrantRevoked},
		{"scoped, expired mid-motion", scoped, true, expire, arm, safety.ErrGrantExpired},
		{"scoped, expired before use", scoped, false, expire, arm, safety.ErrGrantExpired},
		{"once, revoked mid-motion", once, true, revoke, arm, safety.ErrGrantRevoked},
		{"once, expired before its task started", once, false, expire, arm, safety.ErrGrantExpired},
		{"scoped, outside its bounds", scoped, false, func(*testing.T, *fixture, string) {}, map[string]any{"pose": "stowed"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a grant, maybe already moving task-1
			f := newFixture(t)
			g := tc.grant(t, f)
			if tc.started {
				require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveArm, arm)))
			}

			// When it is revoked, expires, or the call is outside it
			tc.change(t, f, g)
			err := f.svc.Authorize(f.use(g, "task-1", ToolMoveArm, tc.args))

			// Then the refusal matches exactly the sentinel for why
			require.ErrorIs(t, err, safety.ErrNotAuthorized)
			for _, s := range []error{safety.ErrGrantRevoked, safety.ErrGrantExpired} {
				require.Equal(t, errors.Is(tc.want, s), errors.Is(err, s), "errors.Is(%v, %v)", err, s)
			}
		})
	}
}

// TestAuthorize_RevokedRefusalNamesOperatorAndReason is the regression
// test for a revoked motion's error naming nobody: the agent must learn
// that an operator revoked the grant, who, and why.
func TestAuthorize_RevokedRefusalNamesOperatorAndReason(t *testing.T) {
	for _, tc := range []struct {
		name, reason, want string
	}{
		{"with a reason", "someone walked into the room", "operator bob revoked the grant at 12:00:00 UTC; their reason: someone walked into the room"},
		{"without a reason", "", "operator bob revoked the grant at 12:00:00 UTC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a task moving on a scoped grant
			f := newFixture(t)
			g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolRelease}, time.Minute)
			require.NoError(t, err)
			u := f.use(g.ID, "task-1", ToolRelease, nil)
			require.NoError(t, f.svc.Authorize(u))

			// When bob revokes it
			_, err = f.svc.RevokeWith(context.Background(), g.ID, "bob", RevokeOptions{Reason: tc.reason})
			require.NoError(t, err)

			// Then the refusal says who and why, in words and in fields
			err = f.svc.Authorize(u)
			var re *RefusalError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "bob", re.By)
			require.Equal(t, tc.reason, re.Reason)
			require.Equal(t, "motion not authorized: grant "+g.ID+": "+tc.want, err.Error())
		})
	}
}

// countingObjects is a hand-written actions.Objects that counts lookups.
type countingObjects struct {
	mu sync.Mutex
	n  int // guarded by mu
}

func (c *countingObjects) Lookup(_ context.Context, id string) (actions.ObjectInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return actions.ObjectInfo{ID: id, Label: "cup"}, nil
}

func (c *countingObjects) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestAuthorize_BoundTaskRecheckedEachPeriodWithoutBoundsLookup is the
// regression test for the per-period re-check being as costly as the
// first: the supervisor asks every control period, and each ask checked
// the bounds again (for a label scope, a call out to perception).
func TestAuthorize_BoundTaskRecheckedEachPeriodWithoutBoundsLookup(t *testing.T) {
	// Given a grasp grant bounded by a label, and task-1 that passed the gate
	objs := &countingObjects{}
	f := newFixture(t, func(c *Conf) { c.Objects = objs })
	g, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolGrasp, Labels: []string{"cup"}}, time.Minute)
	require.NoError(t, err)
	u := f.use(g.ID, "task-1", ToolGrasp, map[string]any{"object_id": "mug_7"})
	require.NoError(t, f.svc.Authorize(u))
	require.Equal(t, 1, objs.count())

	// When the supervisor asks again with the same call, period after period
	for range 50 {
		f.clock.Advance(20 * time.Millisecond)
		u.Now = f.clock.Now()
		require.NoError(t, f.svc.Authorize(u))
	}

	// Then the answer stays yes without asking perception again, and a
	// different call by the same task is checked afresh
	require.Equal(t, 1, objs.count())
	other := f.use(g.ID, "task-1", ToolGrasp, map[string]any{"object_id": "mug_8"})
	require.NoError(t, f.svc.Authorize(other))
	require.Equal(t, 2, objs.count())
}

// TestAuthorize_ConcurrentWithApproveIsRaceFree is the regression test for
// a data race between Approve and Authorize: Approve read a new grant's
// task binding (for the grant.created event) after handing the decision to
// the task, while the task's first Authorize wrote it. The safety rig
// serialised the two to work around it. Run under -race.
func TestAuthorize_ConcurrentWithApproveIsRaceFree(t *testing.T) {
	const n = 50
	// Given n pending requests, each with a task waiting for its decision
	// that sends its motion at once
	f := newFixture(t)
	args := map[string]any{"pose": "ready"}
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		task := "task-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		id, ch := f.request(t, task, ToolMoveArm, args)
		ids[i] = id
		wg.Go(func() {
			d := <-ch
			u := f.use(d.GrantID, task, ToolMoveArm, args)
			for range 3 {
				if errs[i] = f.svc.Authorize(u); errs[i] != nil {
					return
				}
			}
		})
	}

	// When an operator approves them all, each with a scoped grant too,
	// while the tasks bind their grants
	for _, id := range ids {
		_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{
			Grant: &GrantSpec{Scope: Scope{Poses: []string{"ready"}}, TTL: time.Minute},
		})
		require.NoError(t, err)
	}
	wg.Wait()

	// Then every task was authorized (and -race saw no data race)
	for i, err := range errs {
		require.NoError(t, err, "task %d", i)
	}
}

// TestConcurrent_GateAndOperatorsRaceFree runs the gate's per-period
// checks against everything an operator, the runner and the clock can do
// at the same moment — approve (with scoped grants), create, revoke, list,
// withdraw all, expire — so -race sees every path that touches a grant's
// binding. Every refusal must still be a proper one.
func TestConcurrent_GateAndOperatorsRaceFree(t *testing.T) {
	// Several rounds, so the race detector has more than one chance to see
	// the accesses overlap.
	for round := range 5 {
		t.Run(fmt.Sprint("round ", round), gateAndOperatorsRound)
	}
}

func gateAndOperatorsRound(t *testing.T) {
	ends := &endLog{}
	latch := &fakeLatch{}
	f := newFixture(t, func(c *Conf) { c.GrantEnded = ends.record; c.Latched = latch.check })
	ctx := context.Background()
	arm := map[string]any{"pose": "ready"}
	var grants []string
	for i := range 4 {
		g, err := f.svc.CreateGrant(ctx, "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, time.Duration(1+i)*time.Second)
		require.NoError(t, err)
		grants = append(grants, g.ID)
	}
	bad := make(chan error, 10000)
	check := func(err error) {
		if err != nil && !errors.Is(err, safety.ErrNotAuthorized) {
			bad <- err
		}
	}
	at := func(u safety.Use) safety.Use {
		u.Now = time.Time{} // the service's clock, which the test advances
		return u
	}
	done := make(chan struct{})
	var gate, actors sync.WaitGroup
	for i, g := range grants { // tasks moving on the scoped grants, every period
		gate.Go(func() {
			u := at(f.use(g, fmt.Sprintf("task-%d", i), ToolMoveArm, arm))
			for {
				select {
				case <-done:
					return
				default:
					check(f.svc.Authorize(u))
				}
			}
		})
	}
	for i := range 20 { // requests, approvals (half with a scoped grant), their tasks
		actors.Go(func() {
			task := fmt.Sprintf("req-%d", i)
			x := 0.1 + 0.05*float64(i)
			args := moveBase(x, 1)
			id, ch, err := f.svc.Request(ctx, actions.ApprovalRequest{TaskID: task, Tool: ToolMoveBase, Arguments: args})
			if err != nil {
				return
			}
			actors.Go(func() { // the task, waiting for its decision
				if d := <-ch; d.Approved {
					u := at(f.use(d.GrantID, task, ToolMoveBase, args))
					for range 20 {
						check(f.svc.Authorize(u))
					}
				}
			})
			opts := ApproveOptions{}
			if i%2 == 0 {
				opts.Grant = &GrantSpec{Scope: Scope{Rect: &Rect{MinX: x - 0.01, MinY: 0.99, MaxX: x + 0.01, MaxY: 1.01}}, TTL: time.Second}
			}
			_, _ = f.svc.Approve(ctx, id, "alice", opts)
		})
	}
	actors.Go(func() { // operators and the e-stop
		for _, g := range grants[:2] {
			_, _ = f.svc.RevokeWith(ctx, g, "bob", RevokeOptions{Reason: "enough"})
			_ = f.svc.Grants()
			_ = f.svc.List("")
		}
		latch.set(errEStop)
		f.svc.WithdrawAll("the e-stop was pressed")
		latch.set(nil)
	})
	actors.Go(func() { // time passes: grants expire on their timers
		for range 5 {
			f.clock.Advance(time.Second)
		}
	})
	actors.Wait()
	close(done)
	gate.Wait()
	close(bad)
	for err := range bad {
		t.Errorf("a refusal that is not ErrNotAuthorized: %v", err)
	}
}
