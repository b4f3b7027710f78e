package approval

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
)

func TestNew_RejectsBadConf(t *testing.T) {
	cfg := loadConfig(t)
	for _, tc := range []struct {
		name string
		conf Conf
		want string
	}{
		{"no config", Conf{}, "Conf.Config is required"},
		{"negative once ttl", Conf{Config: cfg, OnceGrantTTL: -time.Second}, "OnceGrantTTL is negative"},
		{"negative buffer", Conf{Config: cfg, EventBuffer: -1}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.conf)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestStore_SeesEveryChangeBeforeItTakesEffect(t *testing.T) {
	// Given a store that works
	st := &recStore{}
	f := newFixture(t, func(c *Conf) { c.Store = st })
	id, ch := f.request(t, "task-1", ToolRelease, nil)
	require.Equal(t, []Status{StatusPending}, st.statuses())

	// When it starts failing
	st.setFail(errors.New("disk full"))

	// Then approve, deny and create-grant fail and change nothing
	_, err := f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.ErrorContains(t, err, "disk full")
	_, err = f.svc.Deny(context.Background(), id, "alice", "no")
	require.ErrorContains(t, err, "disk full")
	_, err = f.svc.CreateGrant(context.Background(), "alice", Scope{Tool: ToolRelease}, time.Minute)
	require.ErrorContains(t, err, "disk full")
	_, _, err = f.svc.Request(context.Background(), actions.ApprovalRequest{Tool: ToolRelease})
	require.ErrorContains(t, err, "could not record")
	require.Len(t, f.svc.List(""), 1)
	require.Empty(t, f.svc.Grants())
	a, _ := f.svc.Get(id)
	require.Equal(t, StatusPending, a.Status)

	// But an expiry, a decline, still happens
	f.clock.Advance(time.Minute)
	require.True(t, decision(t, ch).Expired)

	// And once the store works again, an approval is saved grant first
	st.setFail(nil)
	id2, ch2 := f.request(t, "task-2", ToolRelease, nil)
	_, err = f.svc.Approve(context.Background(), id2, "alice", ApproveOptions{})
	require.NoError(t, err)
	require.True(t, decision(t, ch2).Approved)
	require.Equal(t, []Status{StatusPending, StatusPending, StatusApproved}, st.statuses())
	require.Len(t, st.grants, 1)
	require.Equal(t, GrantOnce, st.grants[0].Kind)
}

func TestEvents_SlowSubscriberIsDroppedNotWaitedFor(t *testing.T) {
	// Given a subscriber with a 2-event buffer that never reads, and one that does
	f := newFixture(t, func(c *Conf) { c.EventBuffer = 2 })
	slow, stopSlow := f.svc.Subscribe()
	defer stopSlow()
	fast, stopFast := f.svc.Subscribe()
	defer stopFast()

	// When three events happen
	for i := range 3 {
		f.request(t, "t", ToolRelease, map[string]any{"i": i})
		require.Equal(t, EventApprovalCreated, nextEvent(t, fast).Type)
	}

	// Then the service did not block, and the slow one got what fit and
	// then a closed channel
	require.Equal(t, EventApprovalCreated, (<-slow).Type)
	require.Equal(t, EventApprovalCreated, (<-slow).Type)
	_, ok := <-slow
	require.False(t, ok)
	stopSlow() // unsubscribing after being dropped is harmless
}

func TestClose_CancelsPendingAndRefusesNewWork(t *testing.T) {
	// Given a pending request and a subscriber
	f := newFixture(t)
	id, ch := f.request(t, "task-1", ToolRelease, nil)
	events, _ := f.svc.Subscribe()

	// When the service closes
	require.NoError(t, f.svc.Close())
	require.NoError(t, f.svc.Close())

	// Then the request ends cancelled, subscriptions end, and new work is refused
	d := decision(t, ch)
	require.True(t, d.Cancelled)
	require.Equal(t, EventApprovalCancelled, (<-events).Type)
	_, ok := <-events
	require.False(t, ok)
	_, _, err := f.svc.Request(context.Background(), actions.ApprovalRequest{Tool: ToolRelease})
	require.ErrorIs(t, err, ErrClosed)
	_, err = f.svc.Approve(context.Background(), id, "alice", ApproveOptions{})
	require.ErrorIs(t, err, ErrClosed)
	a, err := f.svc.Get(id)
	require.NoError(t, err)
	require.Equal(t, StatusCancelled, a.Status)
}
