package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/approval"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
)

func TestRing_BoundedNewestFirst(t *testing.T) {
	r := NewRing(3)
	bus := events.New(4)
	detach := r.Attach(bus)
	defer detach()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		bus.Publish(events.TypeSystem, at, fmt.Sprintf("note %d", i))
	}
	got, err := r.Recent(context.Background(), 10)
	require.NoError(t, err)
	require.Len(t, got, 3, "the ring keeps its size")
	require.Equal(t, []string{"note 4", "note 3", "note 2"}, []string{got[0].Text, got[1].Text, got[2].Text})
	got, _ = r.Recent(context.Background(), 1)
	require.Len(t, got, 1)
	require.Equal(t, "note 4", got[0].Text)
}

func TestRing_TaskStatusChangesOnly(t *testing.T) {
	r := NewRing(10)
	v := actions.TaskView{ID: "task-1", Tool: "move_base_to", Status: fsm.Executing, Principal: "agent"}
	r.Record(events.Event{Seq: 1, Type: events.TypeTask, Data: v})
	v.Progress.Fraction = 0.5
	r.Record(events.Event{Seq: 2, Type: events.TypeTask, Data: v})
	v.Status = fsm.Succeeded
	r.Record(events.Event{Seq: 3, Type: events.TypeTask, Data: v})
	r.Record(events.Event{Seq: 4, Type: events.TypeState, Data: "state"})
	got, _ := r.Recent(context.Background(), 10)
	require.Len(t, got, 2, "progress updates and state snapshots are not audit entries")
	require.Equal(t, "task.succeeded", got[0].Kind)
	require.Equal(t, "task.executing", got[1].Kind)
	require.Equal(t, "agent", got[0].By)
}

func TestDescribe(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		ev       events.Event
		kind, by string
		text     string
	}{
		{
			"request",
			events.Event{Type: events.TypeApproval, Data: approval.Event{
				Type:     approval.EventApprovalCreated,
				Approval: &approval.Approval{ID: "apr_1", TaskID: "task-1", Preview: "move the arm to ready", RequestedBy: "agent"},
			}},
			"approval.created", "agent", "agent asks to move the arm to ready (request apr_1, task task-1)",
		},
		{
			"denial with its reason",
			events.Event{Type: events.TypeApproval, Data: approval.Event{
				Type:     approval.EventApprovalDenied,
				Approval: &approval.Approval{ID: "apr_1", Preview: "move the arm to ready", Status: approval.StatusDenied, DecidedBy: "operator", Reason: "not now"},
			}},
			"approval.denied", "operator", "request apr_1 (move the arm to ready) denied by operator: not now",
		},
		{
			"revocation",
			events.Event{Type: events.TypeApproval, Data: approval.Event{
				Type:  approval.EventGrantRevoked,
				Grant: &approval.Grant{ID: "grt_1", RevokedBy: "operator", Description: "move_arm_to poses ready"},
			}},
			"grant.revoked", "operator", "grant grt_1 revoked by operator: move_arm_to poses ready",
		},
		{
			"safety",
			events.Event{Type: events.TypeSafety, Data: map[string]any{"kind": "estop_pressed", "by": "operator", "text": "e-stop pressed", "reason": "test"}},
			"estop_pressed", "operator", "e-stop pressed (test)",
		},
		{"system", events.Event{Type: events.TypeSystem, Data: "bridge started"}, "system", "", "bridge started"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ev.Time = now
			a := Describe(tc.ev)
			require.Equal(t, tc.kind, a.Kind)
			require.Equal(t, tc.by, a.By)
			require.Equal(t, tc.text, a.Text)
			require.Equal(t, now, a.Time)
		})
	}
}
