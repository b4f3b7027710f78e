package approval

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func TestRequest_FilesPendingRequestWithEverything(t *testing.T) {
	// Given a service and a subscriber
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()

	// When the runner files a request
	id, ch := f.request(t, "task-1", ToolMoveBase, moveBase(1, 2))

	// Then it is pending with every field the console shows, and announced
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, "apr_1", a.ID)
	require.Equal(t, StatusPending, a.Status)
	require.Equal(t, "task-1", a.TaskID)
	require.Equal(t, ToolMoveBase, a.Tool)
	require.Equal(t, moveBase(1, 2), a.Arguments)
	require.Equal(t, safety.ArgsHash(ToolMoveBase, moveBase(1, 2)), a.ArgsHash)
	require.Equal(t, "sim-1", a.RobotID)
	require.Equal(t, "preview of move_base_to", a.Preview)
	require.InDelta(t, 1.0, a.Target.X, 1e-9)
	require.Equal(t, "stopped at (0.00, 0.00)", a.RobotState)
	require.Equal(t, "agent", a.RequestedBy)
	require.Equal(t, "s1", a.SessionID)
	require.Equal(t, t0, a.CreatedAt)
	require.Equal(t, t0.Add(60*time.Second), a.ExpiresAt, "TTL comes from safety.approval_ttl")
	ev := nextEvent(t, events)
	require.Equal(t, EventApprovalCreated, ev.Type)
	require.Equal(t, id, ev.Approval.ID)
	select {
	case d := <-ch:
		t.Fatalf("undecided request delivered %+v", d)
	default:
	}
	require.Len(t, f.svc.List("pending"), 1)
}

func TestRequest_CopiesArguments(t *testing.T) {
	// Given a request whose caller later changes its argument map
	f := newFixture(t)
	args := map[string]any{"x": 1.0, "y": 2.0, "nested": map[string]any{"k": "v"}}
	id, _ := f.request(t, "task-1", ToolMoveBase, args)
	hash := safety.ArgsHash(ToolMoveBase, args)

	// When the caller mutates it
	args["x"] = 4.0
	args["nested"].(map[string]any)["k"] = "changed"

	// Then the operator still sees, and approves, what was asked
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.InDelta(t, 1.0, a.Arguments["x"], 1e-9)
	require.Equal(t, "v", a.Arguments["nested"].(map[string]any)["k"])
	require.Equal(t, hash, a.ArgsHash)
}

func TestRequest_RejectsBadRequests(t *testing.T) {
	f := newFixture(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		r    actions.ApprovalRequest
		want string
	}{
		{"no tool", context.Background(), actions.ApprovalRequest{}, "without a tool"},
		{"other robot", context.Background(), actions.ApprovalRequest{Tool: ToolMoveBase, RobotID: "sim-2"}, `robot "sim-2"`},
		{"hash mismatch", context.Background(), actions.ApprovalRequest{Tool: ToolMoveBase, Arguments: moveBase(1, 1), ArgsHash: "beef"}, "does not match"},
		{"cancelled context", cancelled, actions.ApprovalRequest{Tool: ToolMoveBase}, "abandoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ch, err := f.svc.Request(tc.ctx, tc.r)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, ch)
			require.NotNil(t, toolerr.As(err))
		})
	}
	require.Empty(t, f.svc.List(""), "no bad request was filed")
}

func TestRequest_CapsPendingRequests(t *testing.T) {
	// Given a service that lets two requests wait at once
	f := newFixture(t, func(c *Conf) { c.MaxPending = 2 })
	f.request(t, "t1", ToolRelease, nil)
	f.request(t, "t2", ToolRelease, nil)

	// When a third arrives
	_, _, err := f.svc.Request(context.Background(), actions.ApprovalRequest{Tool: ToolRelease})

	// Then it is refused as rate limited, with a retry hint
	require.Equal(t, toolerr.RateLimited, toolerr.TypeOf(err))
	require.Positive(t, toolerr.As(err).RetryAfter)
}

func TestExpiry_PendingRequestExpiresAndNeverAuthorizes(t *testing.T) {
	// Given a pending request and a subscriber
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	id, ch := f.request(t, "task-1", ToolMoveBase, moveBase(1, 2))
	nextEvent(t, events) // created

	// When its TTL passes with no decision
	f.clock.Advance(60 * time.Second)

	// Then the decision is Expired, the request is recorded expired by the
	// system at its expiry time, and nothing can approve it any more
	d := decision(t, ch)
	require.Equal(t, actions.Decision{Expired: true, Reason: "no operator decided within 60 s", By: SystemActor}, d)
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusExpired, a.Status)
	require.Equal(t, t0.Add(time.Minute), *a.DecidedAt)
	require.Equal(t, SystemActor, a.DecidedBy)
	ev := nextEvent(t, events)
	require.Equal(t, EventApprovalExpired, ev.Type)

	_, err = f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.ErrorIs(t, err, ErrNotPending)
	require.ErrorContains(t, err, "already expired by system")
	require.Empty(t, f.svc.Grants(), "an expired request made no grant")
	require.Empty(t, f.svc.List("pending"))
	require.ErrorIs(t, f.svc.Authorize(f.use("", "task-1", ToolMoveBase, moveBase(1, 2))), safety.ErrNotAuthorized)
}

func TestExpiry_DueRequestCannotBeApprovedEvenBeforeItsTimerRuns(t *testing.T) {
	// Given a pending request whose TTL has just passed
	f := newFixture(t)
	id, ch := f.request(t, "task-1", ToolMoveBase, moveBase(1, 2))
	f.clock.Advance(60 * time.Second)

	// When an operator approves at once — possibly before the expiry
	// timer's goroutine has run
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})

	// Then the approval is refused and the one decision is Expired either way
	require.ErrorIs(t, err, ErrNotPending)
	require.True(t, decision(t, ch).Expired)
	require.Empty(t, f.svc.Grants())
}

func TestExpiry_ListShowsDueRequestAsExpired(t *testing.T) {
	// Given a pending request one second before its TTL passes
	f := newFixture(t)
	id, _ := f.request(t, "task-1", ToolRelease, nil)
	f.clock.Advance(59 * time.Second)
	require.Len(t, f.svc.List("pending"), 1)

	// When the TTL passes
	f.clock.Advance(time.Second)

	// Then List and Get report it expired, whether or not the timer ran
	require.Empty(t, f.svc.List("pending"))
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusExpired, a.Status)
}

func TestApprove_OnceAuthorizesExactlyThatCallForOneTask(t *testing.T) {
	args := moveBase(1, 2)
	for _, tc := range []struct {
		name  string
		use   func(f *fixture, grantID string) safety.Use
		cause RefusalCause // "" when authorized
	}{
		{"the approved call", func(f *fixture, g string) safety.Use { return f.use(g, "task-1", ToolMoveBase, args) }, ""},
		{"another task", func(f *fixture, g string) safety.Use { return f.use(g, "task-2", ToolMoveBase, args) }, CauseOtherTask},
		{"other arguments", func(f *fixture, g string) safety.Use { return f.use(g, "task-1", ToolMoveBase, moveBase(1, 3)) }, CauseOtherArgs},
		{"other tool", func(f *fixture, g string) safety.Use { return f.use(g, "task-1", ToolMoveArm, args) }, CauseOtherTool},
		{"other robot", func(f *fixture, g string) safety.Use {
			u := f.use(g, "task-1", ToolMoveBase, args)
			u.RobotID = "sim-2"
			return u
		}, CauseOtherRobot},
		{"no task", func(f *fixture, g string) safety.Use { return f.use(g, "", ToolMoveBase, args) }, CauseNoTask},
		{"no grant", func(f *fixture, _ string) safety.Use { return f.use("", "task-1", ToolMoveBase, args) }, CauseNoGrant},
		{"unknown grant", func(f *fixture, _ string) safety.Use { return f.use("grt_nope", "task-1", ToolMoveBase, args) }, CauseUnknownGrant},
		{"after expiry, never started", func(f *fixture, g string) safety.Use {
			f.clock.Advance(60 * time.Second)
			return f.use(g, "task-1", ToolMoveBase, args)
		}, CauseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a request for task-1 approved once by an operator
			f := newFixture(t)
			id, ch := f.request(t, "task-1", ToolMoveBase, args)
			_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{Reason: "looks fine"})
			require.NoError(t, err)
			d := decision(t, ch)
			require.True(t, d.Approved)
			require.Equal(t, "alice", d.By)
			require.Equal(t, "grt_2", d.GrantID)

			// When the gate is asked
			err = f.svc.Authorize(tc.use(f, d.GrantID))

			// Then only the exact call of the one task passes
			if tc.cause == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, safety.ErrNotAuthorized)
			var re *RefusalError
			require.ErrorAs(t, err, &re)
			require.Equal(t, tc.cause, re.Cause, err.Error())
		})
	}
}

// TestApprove_OnceGrantListedAsUsedOnceItsTaskStarted is the regression
// test for the console listing spent approve-once grants as active (with a
// revoke button) after their task had finished.
func TestApprove_OnceGrantListedAsUsedOnceItsTaskStarted(t *testing.T) {
	f := newFixture(t)
	args := moveBase(1, 2)
	id, ch := f.request(t, "task-1", ToolMoveBase, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	d := decision(t, ch)
	// Given the approved grant is listed as active until used
	require.Len(t, f.svc.Grants(), 1)
	// When its task passes the gate
	require.NoError(t, f.svc.Authorize(f.use(d.GrantID, "task-1", ToolMoveBase, args)))
	// Then it is used, no longer listed as active, and still lets its task finish
	g, err := f.svc.Grant(d.GrantID)
	require.NoError(t, err)
	require.Equal(t, GrantUsed, g.Status)
	require.Empty(t, f.svc.Grants())
	require.NoError(t, f.svc.Authorize(f.use(d.GrantID, "task-1", ToolMoveBase, args)))
}

func TestApprove_OnceGrantBindsToFirstTaskWhenRequestNamedNone(t *testing.T) {
	// Given an approval of a request that named no task
	f := newFixture(t)
	args := map[string]any{"pose": "ready"}
	id, ch := f.request(t, "", ToolMoveArm, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	g := decision(t, ch).GrantID

	// When task A uses it first
	require.NoError(t, f.svc.Authorize(f.use(g, "A", ToolMoveArm, args)))

	// Then it belongs to A: B is refused, A may keep using it
	err = f.svc.Authorize(f.use(g, "B", ToolMoveArm, args))
	require.ErrorContains(t, err, "belongs to task A")
	require.NoError(t, f.svc.Authorize(f.use(g, "A", ToolMoveArm, args)))
	snap, err := f.svc.Grant(g)
	require.NoError(t, err)
	require.Equal(t, "A", snap.TaskID)
}

func TestApprove_StartedTaskMayFinishPastExpiry(t *testing.T) {
	// Given task-1 started moving on an approve-once grant
	f := newFixture(t)
	args := moveBase(1, 2)
	id, ch := f.request(t, "task-1", ToolMoveBase, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	g := decision(t, ch).GrantID
	require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))

	// When the grant's expiry passes mid-motion
	f.clock.Advance(2 * time.Minute)

	// Then task-1 may finish, and no other task may start on it
	require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))
	require.ErrorIs(t, f.svc.Authorize(f.use(g, "task-2", ToolMoveBase, args)), safety.ErrNotAuthorized)
	require.Empty(t, f.svc.Grants(), "an expired grant is not listed as active")
}

func TestApprove_OnceGrantRevokedStopsEvenTheBoundTask(t *testing.T) {
	// Given task-1 moving on an approve-once grant
	f := newFixture(t)
	args := moveBase(1, 2)
	id, ch := f.request(t, "task-1", ToolMoveBase, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	g := decision(t, ch).GrantID
	require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))

	// When an operator revokes it
	_, err = f.svc.Revoke(context.Background(), g, "bob")
	require.NoError(t, err)

	// Then the very next command is refused, saying by whom
	err = f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args))
	require.ErrorIs(t, err, safety.ErrNotAuthorized)
	require.ErrorIs(t, err, safety.ErrGrantRevoked)
	require.ErrorContains(t, err, "operator bob revoked the grant")
}

func TestDeny_ReasonReachesDecisionVerbatim(t *testing.T) {
	// Given a pending request
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	id, ch := f.request(t, "task-1", ToolMoveBase, moveBase(1, 2))
	nextEvent(t, events)

	// When an operator denies it with a reason full of odd characters
	reason := "  Not now — the table has a \"wet\" sign; try 10:30 ✋\n"
	a, err := f.svc.Deny(context.Background(), id, "alice", reason)

	// Then the decision and the record carry it byte for byte
	require.NoError(t, err)
	require.Equal(t, actions.Decision{Reason: reason, By: "alice"}, decision(t, ch))
	require.Equal(t, reason, a.Reason)
	require.Equal(t, StatusDenied, a.Status)
	require.Equal(t, "alice", a.DecidedBy)
	require.Equal(t, t0, *a.DecidedAt)
	ev := nextEvent(t, events)
	require.Equal(t, EventApprovalDenied, ev.Type)
	require.Equal(t, reason, ev.Approval.Reason)
	require.Empty(t, f.svc.Grants(), "a denial makes no grant")
}

func TestDeny_RequiresReasonAndOperator(t *testing.T) {
	f := newFixture(t)
	id, _ := f.request(t, "task-1", ToolRelease, nil)
	for _, tc := range []struct {
		name, by, reason, field string
	}{
		{"empty reason", "alice", "", "reason"},
		{"blank reason", "alice", " \t\n", "reason"},
		{"reason too long", "alice", string(make([]byte, MaxReasonLen+1)), "reason"},
		{"invalid utf-8", "alice", "\xff", "reason"},
		{"no operator", "", "no", "by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.Deny(context.Background(), id, tc.by, tc.reason)
			var ie *InvalidError
			require.ErrorAs(t, err, &ie)
			require.Equal(t, tc.field, ie.Field)
		})
	}
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusPending, a.Status, "a rejected denial changes nothing")
}

func TestWithdraw_DeliversCancelled(t *testing.T) {
	// Given a pending request
	f := newFixture(t)
	id, ch := f.request(t, "task-1", ToolRelease, nil)

	// When its task is cancelled
	f.svc.Withdraw(id, "task cancelled by the agent")

	// Then the decision is Cancelled with the reason, and a second
	// withdrawal or a late decision changes nothing
	require.Equal(t, actions.Decision{Cancelled: true, Reason: "task cancelled by the agent", By: SystemActor}, decision(t, ch))
	f.svc.Withdraw(id, "again")
	f.svc.Withdraw("apr_unknown", "nothing")
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.ErrorIs(t, err, ErrNotPending)
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, a.Status)
	require.Equal(t, "task cancelled by the agent", a.Reason)
}

func TestDecidingTwice_IsAnError(t *testing.T) {
	approve := func(f *fixture, id string) error {
		_, err := f.svc.Approve(context.Background(), id, "bob", ApproveOptions{})
		return err
	}
	deny := func(f *fixture, id string) error {
		_, err := f.svc.Deny(context.Background(), id, "bob", "no")
		return err
	}
	for _, tc := range []struct {
		name          string
		first, second func(*fixture, string) error
		firstStatus   Status
	}{
		{"approve then approve", approve, approve, StatusApproved},
		{"approve then deny", approve, deny, StatusApproved},
		{"deny then approve", deny, approve, StatusDenied},
		{"deny then deny", deny, deny, StatusDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a request decided once
			f := newFixture(t)
			id, ch := f.request(t, "task-1", ToolRelease, nil)
			require.NoError(t, tc.first(f, id))
			first := decision(t, ch)

			// When it is decided again
			err := tc.second(f, id)

			// Then the second decision fails naming the first, which stands
			require.ErrorIs(t, err, ErrNotPending)
			var np *NotPendingError
			require.ErrorAs(t, err, &np)
			require.Equal(t, string(tc.firstStatus), np.Status)
			require.Equal(t, "bob", np.By)
			a, _ := f.svc.Get(id)
			require.Equal(t, tc.firstStatus, a.Status)
			require.Equal(t, tc.firstStatus == StatusApproved, first.Approved)
		})
	}
	t.Run("unknown id", func(t *testing.T) {
		f := newFixture(t)
		require.ErrorIs(t, approve(f, "apr_nope"), ErrNotFound)
		require.ErrorIs(t, deny(f, "apr_nope"), ErrNotFound)
		_, err := f.svc.Get("apr_nope")
		require.ErrorIs(t, err, ErrNotFound)
		_, err = f.svc.Revoke(context.Background(), "grt_nope", "bob")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func TestApprove_WithScopedGrantCoversLaterCalls(t *testing.T) {
	// Given a move_arm_to request approved with a grant for named poses
	f := newFixture(t)
	events, stop := f.svc.Subscribe()
	defer stop()
	id, ch := f.request(t, "task-1", ToolMoveArm, map[string]any{"pose": "ready"})
	nextEvent(t, events)
	a, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{
		Grant: &GrantSpec{Scope: Scope{Poses: []string{"ready", "stowed"}}, TTL: 10 * time.Minute},
	})
	require.NoError(t, err)
	require.True(t, decision(t, ch).Approved)
	require.Equal(t, "grt_2", a.GrantID)
	require.Equal(t, "grt_3", a.ScopedGrantID)
	for _, want := range []EventType{EventApprovalApproved, EventGrantCreated, EventGrantCreated} {
		require.Equal(t, want, nextEvent(t, events).Type)
	}
	scoped, err := f.svc.Grant(a.ScopedGrantID)
	require.NoError(t, err)
	require.Equal(t, ToolMoveArm, scoped.Tool, "the scope's tool defaults to the request's")
	require.Equal(t, id, scoped.ApprovalID)
	require.Equal(t, t0.Add(10*time.Minute), scoped.ExpiresAt)

	// When task-2 asks to move to stowed, and task-3 to raw joints
	id2, ch2 := f.request(t, "task-2", ToolMoveArm, map[string]any{"pose": "stowed"})
	_, ch3 := f.request(t, "task-3", ToolMoveArm, map[string]any{"joints": map[string]any{"elbow": 0.1}})

	// Then stowed is approved at once by the grant, recorded as such, and
	// raw joints wait for an operator
	d2 := decision(t, ch2)
	require.Equal(t, actions.Decision{
		Approved: true, By: "alice", GrantID: "grt_3", Reason: d2.Reason,
		GrantScope: "move_arm_to the named poses ready, stowed", GrantExpires: scoped.ExpiresAt,
	}, d2, "the decision says what the grant allows and until when, for the task's words")
	require.Contains(t, d2.Reason, "covered by scoped grant grt_3")
	a2, _ := f.svc.Get(id2)
	require.Equal(t, StatusApproved, a2.Status)
	require.Equal(t, "grt_3", a2.GrantID)
	require.NoError(t, f.svc.Authorize(f.use(d2.GrantID, "task-2", ToolMoveArm, map[string]any{"pose": "stowed"})))
	select {
	case d := <-ch3:
		t.Fatalf("joints call outside the scope was decided: %+v", d)
	default:
	}
	require.Len(t, f.svc.List("pending"), 1)
	require.Len(t, f.svc.Grants(), 2)
}

func TestHistory_ForgetsOldestDecidedRequests(t *testing.T) {
	// Given a service that keeps three requests
	f := newFixture(t, func(c *Conf) { c.History = 3 })
	pendingID, _ := f.request(t, "t0", ToolRelease, nil)
	for i := range 4 {
		id, _ := f.request(t, "t", ToolRelease, map[string]any{"i": i})
		f.svc.Withdraw(id, "")
	}

	// Then the pending one is kept and only the newest decided ones
	list := f.svc.List("")
	require.Len(t, list, 3)
	require.Equal(t, pendingID, list[0].ID)
}

func TestConcurrentDecisions_ExactlyOneWins(t *testing.T) {
	// Given 20 pending requests
	f := newFixture(t)
	type req struct {
		id string
		ch <-chan actions.Decision
	}
	var reqs []req
	for i := range 20 {
		id, ch := f.request(t, "t", ToolRelease, map[string]any{"i": i})
		reqs = append(reqs, req{id, ch})
	}

	// When operators approve, deny and the runner withdraws each of them
	// at once, while the TTL passes
	done := make(chan struct{})
	for _, r := range reqs {
		for _, act := range []func(){
			func() { _, _ = f.svc.Approve(context.Background(), r.id, "alice", ApproveOptions{}) },
			func() { _, _ = f.svc.Deny(context.Background(), r.id, "bob", "no") },
			func() { f.svc.Withdraw(r.id, "cancelled") },
		} {
			go func() { act(); done <- struct{}{} }()
		}
	}
	f.clock.Advance(time.Minute)
	for range 3 * len(reqs) {
		<-done
	}

	// Then each request delivered exactly one decision, and its record agrees
	for _, r := range reqs {
		d := decision(t, r.ch)
		a, err := f.svc.Get(r.id)
		require.NoError(t, err)
		switch {
		case d.Approved:
			require.Equal(t, StatusApproved, a.Status)
			require.Equal(t, a.GrantID, d.GrantID)
		case d.Expired:
			require.Equal(t, StatusExpired, a.Status)
		case d.Cancelled:
			require.Equal(t, StatusCancelled, a.Status)
		default:
			require.Equal(t, StatusDenied, a.Status)
			require.Equal(t, "no", d.Reason)
		}
	}
}

// TestRequest_HoldRecordLeavesACoveredRequestsRecordToTheRunner: asked to
// (actions.ApprovalRequest.HoldRecord), the service does not write the
// record of a request a scoped grant covers: the decision carries it, for
// the runner to write in the commit before the task's first command, and
// can write it alone. A request that waits for an operator is written as
// always, after the runner's BeforeFile.
func TestRequest_HoldRecordLeavesACoveredRequestsRecordToTheRunner(t *testing.T) {
	st := &recStore{}
	f := newFixture(t, func(c *Conf) { c.Store = st })
	ctx := context.Background()
	g, err := f.svc.CreateGrant(ctx, "alice", Scope{Tool: ToolMoveArm, Poses: []string{"ready"}}, time.Minute)
	require.NoError(t, err)
	var order []string
	req := func(task string, args map[string]any) actions.Decision {
		_, ch, err := f.svc.Request(ctx, actions.ApprovalRequest{
			TaskID: task, Tool: ToolMoveArm, Arguments: args, Preview: "preview", RequestedBy: "agent",
			HoldRecord: true, BeforeFile: func() { order = append(order, "before file "+task) },
		})
		require.NoError(t, err)
		select {
		case d := <-ch:
			return d
		default:
			st.mu.Lock()
			order = append(order, fmt.Sprintf("%d approvals written", len(st.approvals)))
			st.mu.Unlock()
			return actions.Decision{}
		}
	}

	// When a covered call is filed
	d := req("task-1", map[string]any{"pose": "ready"})
	// Then it is approved by the grant, its record left to the runner
	require.True(t, d.Approved)
	require.Equal(t, g.ID, d.GrantID)
	require.NotNil(t, d.Held)
	a, ok := d.Held.Value.(Approval)
	require.True(t, ok, "%T", d.Held.Value)
	require.Equal(t, StatusApproved, a.Status)
	require.Equal(t, "task-1", a.TaskID)
	require.Equal(t, g.ID, a.GrantID)
	require.Empty(t, st.statuses(), "nothing written by the service")
	require.Empty(t, order, "a covered request needs nothing of the runner written first")
	// And Save writes exactly that record
	require.NoError(t, d.Held.Save(ctx))
	require.Equal(t, []Status{StatusApproved}, st.statuses())

	// When a call the grant does not cover is filed
	d = req("task-2", map[string]any{"pose": "stowed"})
	// Then the runner's records go first, then the request's
	require.False(t, d.Approved)
	require.Equal(t, []string{"before file task-2", "2 approvals written"}, order)
	require.Equal(t, []Status{StatusApproved, StatusPending}, st.statuses())
}
