package approval

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnceGrant_UsedIsAnnouncedOnceAtItsTaskStart is the regression test of
// a used approve-once grant that stayed in the console's list of active
// grants (with a Revoke button) until something else made the page reload
// it: the service said nothing when the grant became used.
func TestOnceGrant_UsedIsAnnouncedOnceAtItsTaskStart(t *testing.T) {
	// Given an approved request, whose approve-once grant is active
	f := newFixture(t)
	args := moveBase(1, 1)
	id, ch := f.request(t, "task-1", ToolMoveBase, args)
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.NoError(t, err)
	g := decision(t, ch).GrantID
	events, stop := f.svc.Subscribe()
	defer stop()

	// When its task starts (the gate's first authorization of it)
	require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))

	// Then the grant is announced used, bound to the task, before
	// Authorize returns (the hub delivers as it publishes)
	var ev Event
	select {
	case ev = <-events:
	default:
		t.Fatal("no event when the approve-once grant became used")
	}
	require.Equal(t, EventGrantUsed, ev.Type)
	require.Equal(t, g, ev.Grant.ID)
	require.Equal(t, GrantUsed, ev.Grant.Status)
	require.Equal(t, "task-1", ev.Grant.TaskID)

	// And the checks of every later control period announce nothing more
	for range 3 {
		require.NoError(t, f.svc.Authorize(f.use(g, "task-1", ToolMoveBase, args)))
	}
	select {
	case ev := <-events:
		t.Fatalf("a second event for a grant already used: %+v", ev)
	default:
	}
}
