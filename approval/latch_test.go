package approval

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

// TestWithdrawAll_EveryPendingRequestWithdrawn is the regression test for
// an e-stop withdrawing only the live task's request: requests of tasks
// still being planned stayed pending, survived the reset and ran after an
// operator approved them.
func TestWithdrawAll_EveryPendingRequestWithdrawn(t *testing.T) {
	// Given, in a store and on the event stream: one request already past
	// its TTL, two pending ones, and one already approved
	st := &recStore{}
	var timers *syncTimers // the due one's timer must not beat WithdrawAll to it
	f := newFixture(t, func(c *Conf) { c.Store = st }, withSyncTimers(&timers))
	dueID, dueCh := f.request(t, "task-due", ToolRelease, map[string]any{"i": 0})
	f.clock.Advance(30 * time.Second)
	approvedID, approvedCh := f.request(t, "task-ok", ToolRelease, map[string]any{"i": 1})
	_, err := f.svc.Approve(context.Background(), approvedID, "alice", ApproveOptions{})
	require.NoError(t, err)
	require.True(t, delivered(t, approvedCh).Approved)
	id2, ch2 := f.request(t, "task-2", ToolMoveBase, moveBase(1, 1))
	id3, ch3 := f.request(t, "task-3", ToolGrasp, map[string]any{"object_id": "red_cup"})
	f.clock.Advance(30 * time.Second) // the first one is due now
	events, stop := f.svc.Subscribe()
	defer stop()
	saved := len(st.statuses())

	// When the e-stop latches and every pending request is withdrawn
	n := f.svc.WithdrawAll("the e-stop was pressed by bob")

	// Then both pending ones end Cancelled with that reason, recorded and
	// announced; the due one expired; the approved one is untouched
	require.Equal(t, 2, n)
	want := actions.Decision{Cancelled: true, Reason: "the e-stop was pressed by bob", By: SystemActor}
	require.Equal(t, want, delivered(t, ch2))
	require.Equal(t, want, delivered(t, ch3))
	require.True(t, delivered(t, dueCh).Expired)
	for id, status := range map[string]Status{id2: StatusCancelled, id3: StatusCancelled, dueID: StatusExpired, approvedID: StatusApproved} {
		a, err := f.svc.Get(id)
		require.NoError(t, err)
		require.Equal(t, status, a.Status, id)
	}
	require.Empty(t, f.svc.List(string(StatusPending)))
	cancelled := 0
	for _, s := range st.statuses()[saved:] {
		if s == StatusCancelled {
			cancelled++
		}
	}
	require.Equal(t, 2, cancelled, "each withdrawal is in the audit")
	var seen []EventType
	for range 3 {
		seen = append(seen, nextEvent(t, events).Type)
	}
	require.ElementsMatch(t, []EventType{EventApprovalExpired, EventApprovalCancelled, EventApprovalCancelled}, seen)

	// And a second call finds nothing to withdraw
	require.Zero(t, f.svc.WithdrawAll("again"))
}

func TestWithdrawAll_AfterCloseDoesNothing(t *testing.T) {
	f := newFixture(t)
	f.request(t, "task-1", ToolRelease, nil)
	require.NoError(t, f.svc.Close())
	require.Zero(t, f.svc.WithdrawAll("e-stop"))
}

// TestRequest_RefusedWhileLatched is the regression test for a call
// planned during an e-stop being filed for approval (and, under a scoped
// grant, approved at once) although the robot was latched.
func TestRequest_RefusedWhileLatched(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latch   error
		covered bool // a scoped grant covers the call
		want    error
	}{
		{"e-stop", errEStop, false, safety.ErrEStopActive},
		{"fault", errFault, false, safety.ErrFaultLatched},
		{"e-stop, covered by a scoped grant", errEStop, true, safety.ErrEStopActive},
		{"latch that is not a toolerr", errors.New("latched somehow"), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a latched robot and a subscriber
			st := &recStore{}
			f, latch := newLatchFixture(t, func(c *Conf) { c.Store = st })
			if tc.covered {
				_, err := f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolRelease}, time.Minute)
				require.NoError(t, err)
			}
			events, stop := f.svc.Subscribe()
			defer stop()
			latch.set(tc.latch)

			// When the runner files a request
			_, ch, err := f.svc.Request(context.Background(), actions.ApprovalRequest{TaskID: "task-1", Tool: ToolRelease})

			// Then it is refused with the latch's error and nothing is
			// filed, approved, recorded or announced
			require.Nil(t, ch)
			require.ErrorIs(t, err, tc.latch)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			require.NotNil(t, toolerr.As(err))
			require.Empty(t, f.svc.List(""))
			require.Empty(t, st.statuses())
			select {
			case ev := <-events:
				t.Fatalf("a refused request was announced: %+v", ev)
			default:
			}
			latch.requireChecked(t)

			// And once the latch is reset, requests are filed again
			latch.set(nil)
			f.request(t, "task-2", ToolRelease, nil)
			require.Len(t, f.svc.List(""), 1)
		})
	}
}

// TestApprove_RefusedWhileLatched is the regression test for an approval
// given after an e-stop latched: a grasp planned during the e-stop was
// filed, survived the reset and ran after the operator approved it.
func TestApprove_RefusedWhileLatched(t *testing.T) {
	for _, tc := range []struct {
		name  string
		latch error
		want  error
		msg   string
	}{
		{"e-stop", errEStop, safety.ErrEStopActive, "the e-stop is latched"},
		{"fault", errFault, safety.ErrFaultLatched, "a fault is latched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a pending request, and a latch set after it was filed
			f, latch := newLatchFixture(t)
			id, ch := f.request(t, "task-1", ToolGrasp, map[string]any{"object_id": "red_cup"})
			latch.set(tc.latch)

			// When the operator approves it, with a scoped grant too
			_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{
				Grant: &GrantSpec{Scope: Scope{Tool: ToolGrasp}, TTL: time.Minute},
			})

			// Then the approval is refused saying what is latched, checked
			// under the deciding lock; no grant was made; the request is
			// withdrawn and its task told why
			require.ErrorIs(t, err, ErrLatched)
			require.ErrorIs(t, err, tc.want)
			var le *LatchedError
			require.ErrorAs(t, err, &le)
			require.Equal(t, id, le.ApprovalID)
			require.ErrorContains(t, err, tc.msg)
			require.ErrorContains(t, err, "the request was withdrawn")
			latch.requireChecked(t)
			require.Empty(t, f.svc.Grants())
			d := delivered(t, ch)
			require.True(t, d.Cancelled)
			require.Contains(t, d.Reason, "withdrawn when alice tried to approve it")
			require.Contains(t, d.Reason, tc.msg)
			a, err := f.svc.Get(id)
			require.NoError(t, err)
			require.Equal(t, StatusCancelled, a.Status)
			require.Empty(t, a.GrantID)

			// And after the reset it cannot be approved any more
			latch.set(nil)
			_, err = f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
			require.ErrorIs(t, err, ErrNotPending)
		})
	}
}

func TestDeny_AllowedWhileLatched(t *testing.T) {
	// Given a pending request and a latched e-stop
	f, latch := newLatchFixture(t)
	id, ch := f.request(t, "task-1", ToolRelease, nil)
	latch.set(errEStop)

	// When the operator denies it
	_, err := f.svc.Deny(context.Background(), id, "alice", "not now")

	// Then the denial, a decline, goes through
	require.NoError(t, err)
	require.Equal(t, actions.Decision{Reason: "not now", By: "alice"}, delivered(t, ch))
}

func TestHTTP_ApproveWhileLatchedIsConflict(t *testing.T) {
	// Given a pending request and a latched e-stop
	fx, latch := newLatchFixture(t)
	f := newHTTPFixtureOn(fx)
	id, _ := f.request(t, "task-1", ToolRelease, nil)
	latch.set(errEStop)

	// When alice approves it over the operator API
	r := f.do(t, "POST", "/v1/approvals/"+id+"/approve", "")

	// Then the answer is 409 saying the e-stop is latched and the request
	// was withdrawn
	require.Equal(t, http.StatusConflict, r.code, r.body)
	require.Equal(t, "CONFLICT", r.errType())
	require.Contains(t, r.errMsg(), "the e-stop is latched")
	require.Contains(t, r.errMsg(), "the request was withdrawn")
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, a.Status)
}
