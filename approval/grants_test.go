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

	// Then a new task is refused as expired, the one that started in time
	// may finish (inside the bounds only), and the expiry is announced
	err = f.svc.Authorize(f.use(g.ID, "task-2", ToolMoveBase, moveBase(1, 1)))
	var re *RefusalError
	require.ErrorAs(t, err, &re)
	require.Equal(t, CauseExpired, re.Cause)
	require.NoError(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(1, 1))))
	require.ErrorIs(t, f.svc.Authorize(f.use(g.ID, "task-1", ToolMoveBase, moveBase(3, 1))), safety.ErrNotAuthorized)
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
		{"ttl beyond max", Scope{Tool: ToolRelease}, 31 * time.Minute, "ttl", "longer than this robot's max_grant_ttl of 30m0s"},
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
