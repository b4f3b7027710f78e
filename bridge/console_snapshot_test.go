package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/events"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/perception"
	"github.com/robot-bridge/robot-bridge/robot"
)

func TestInsidePolygon_NonConvexRoom(t *testing.T) {
	// An L-shaped room: the square (0,0)-(4,4) without its top-right quarter.
	room := []hwconfig.Point2{{0, 0}, {4, 0}, {4, 2}, {2, 2}, {2, 4}, {0, 4}}
	for _, tc := range []struct {
		name string
		x, y float64
		in   bool
	}{
		{"inside the foot", 3, 1, true},
		{"inside the leg", 1, 3, true},
		{"in the missing quarter", 3, 3, false},
		{"beyond the wall", 5, 1, false},
		{"below the floor", 1, -0.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.in, insidePolygon(room, tc.x, tc.y))
		})
	}
}

// TestTaskStarts_MovedOnlyWhenKnown: "cancelled before it moved" may be
// said only of a task seen from its start that never reached executing.
func TestTaskStarts_MovedOnlyWhenKnown(t *testing.T) {
	bus := events.New(16)
	ts := newTaskStarts(bus)
	pub := func(id string, st fsm.State) {
		bus.Publish(events.TypeTask, time.Now(), actions.TaskView{ID: id, Status: st})
	}
	// Given a task cancelled while it waited
	pub("a", fsm.AwaitingApproval)
	pub("a", fsm.Cancelled)
	// And one that ran, then was cancelled
	pub("b", fsm.AwaitingApproval)
	pub("b", fsm.Approved)
	pub("b", fsm.Executing)
	pub("b", fsm.Stopping)
	pub("b", fsm.Cancelled)
	// And one first heard of while it ran (a bridge restarted since)
	pub("c", fsm.Executing)
	pub("c", fsm.Cancelled)

	moved := func(id string) *bool { return ts.view(actions.TaskView{ID: id, Status: fsm.Cancelled}).Moved }
	require.NotNil(t, moved("a"))
	require.False(t, *moved("a"))
	require.NotNil(t, moved("b"))
	require.True(t, *moved("b"))
	require.Nil(t, moved("c"), "unknown, never a guess")
	require.Nil(t, moved("never-seen"))
}

// TestObjectsInRoom_DetectionsOutsideAreNotDrawn: a detection placed
// outside the room (through a wall, behind a window) is counted, never
// drawn as an object in it.
func TestObjectsInRoom_DetectionsOutsideAreNotDrawn(t *testing.T) {
	room := []hwconfig.Point2{{-2, -2}, {2, -2}, {2, 2}, {-2, 2}}
	at := func(id string, x, y float64) perception.Object {
		return perception.Object{ID: id, Label: "cup", Position: perception.Frames{Room: robot.Vec3{X: x, Y: y}}}
	}
	objs := []perception.Object{at("in", 1, 1), at("through-the-wall", 3.5, 0), at("behind", -1, -7)}

	in, outside := objectsInRoom(room, objs)
	require.Equal(t, []consoleObject{{ID: "in", Label: "cup", X: 1, Y: 1}}, in)
	require.Equal(t, 2, outside)

	// Without a room outline nothing can be judged outside
	in, outside = objectsInRoom(nil, objs)
	require.Len(t, in, 3)
	require.Zero(t, outside)
}
