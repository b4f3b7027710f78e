package toolapi

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/toolerr"
)

func moving() robot.State {
	st := testState()
	st.Velocity.V = 0.25
	return st
}

// TestEnvelope_SilentRobotIsNotCalledStopped: the envelope's robot field
// used to say "stopped at (x, y)" from the newest state however old it
// was, so a robot that went silent mid-motion was reported stopped. Every
// envelope now says what is true at the moment it is written.
func TestEnvelope_SilentRobotIsNotCalledStopped(t *testing.T) {
	tests := []struct {
		name   string
		state  robot.State
		age    time.Duration
		linkUp bool
		want   string
	}{
		{
			"silent mid-motion, link up", moving(), 2 * time.Second, true,
			"last seen moving at (1.20, 0.40) facing 90° 2.0 s ago (no state since), gripper open, battery 87%, no task running",
		},
		{
			"silent at rest, link up", testState(), 2 * time.Second, true,
			"last seen at (1.20, 0.40) facing 90° 2.0 s ago (no state since), gripper open, battery 87%, no task running",
		},
		{
			"one millisecond past the 500 ms state timeout", testState(), 501 * time.Millisecond, true,
			"last seen at (1.20, 0.40) facing 90° 0.5 s ago (no state since), gripper open, battery 87%, no task running",
		},
		{
			"link down, newest state fresh and at rest", testState(), 0, false,
			"robot link down; last seen at (1.20, 0.40) facing 90° 0.0 s ago (no state since), gripper open, battery 87%, no task running",
		},
		{
			"current state at rest", testState(), 100 * time.Millisecond, true,
			"stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%, no task running",
		},
		{
			"current state moving", moving(), 100 * time.Millisecond, true,
			"moving at (1.20, 0.40) facing 90°, gripper open, battery 87%, no task running",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the robot's newest state, received tc.age ago
			h := newHarness(t)
			h.robot.LatestFn = func(context.Context) (robot.State, error) { return tc.state, nil }
			h.robot.receivedAgo(tc.age)
			h.robot.up.Store(tc.linkUp)
			// When the agent makes any call
			for _, tool := range []string{"list_named_poses", "get_safety_status", "move_base_to"} {
				env := h.call(tool, args(map[string]any{"location": "table"}))
				// Then the robot field says exactly what is known now
				require.Equal(t, tc.want, env.Robot, tool)
			}
		})
	}
}

func TestGetRobotState_StaleStateSaysLastSeen(t *testing.T) {
	// Given a live link and a moving state received 3 s ago
	h := newHarness(t)
	h.robot.LatestFn = func(context.Context) (robot.State, error) { return moving(), nil }
	h.robot.receivedAgo(3 * time.Second)
	// When the agent reads the state
	env := h.call("get_robot_state", nil)
	// Then it gets the last state, marked stale, and words that do not
	// claim it is the robot's now
	require.True(t, env.OK)
	require.Equal(t, "The robot was last seen moving at (1.20, 0.40) facing 90° 3.0 s ago (no state since), gripper open, battery 87%; it may have moved since.", env.Text)
	var data struct {
		Condition  robot.Condition `json:"condition"`
		Stale      bool            `json:"stale"`
		StateAgeMS int64           `json:"state_age_ms"`
		LinkUp     bool            `json:"link_up"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &data))
	require.Equal(t, robot.ConditionStale, data.Condition)
	require.True(t, data.Stale)
	require.EqualValues(t, 3000, data.StateAgeMS)
	require.True(t, data.LinkUp)

	// When a fresh state arrives, then the same call says it is current
	h.robot.receivedAgo(20 * time.Millisecond)
	env = h.call("get_robot_state", nil)
	require.Equal(t, "The robot is moving at (1.20, 0.40) facing 90°, gripper open, battery 87%.", env.Text)
	require.NoError(t, json.Unmarshal(env.Data, &data))
	require.Equal(t, robot.ConditionMoving, data.Condition)
	require.False(t, data.Stale)
}

func TestGetRobotState_LinkDownGivesTheLastKnownStateAndItsAge(t *testing.T) {
	// Given a link that is down, the last state (at rest) 4 s old
	h := newHarness(t)
	h.robot.up.Store(false)
	h.robot.receivedAgo(4 * time.Second)
	// When the agent reads the state
	env := h.call("get_robot_state", nil)
	// Then it is UNAVAILABLE with a wait, and the last known state with its
	// age is in data, message and text, said as what the robot was
	require.False(t, env.OK)
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	require.Positive(t, env.Error.RetryAfterMS)
	require.Equal(t, "the robot link is down; last known 4.0 s ago: stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%; it may have moved since.", env.Error.Message)
	require.Equal(t, true, env.Error.Details["last_known"])
	require.Contains(t, env.Text, "last known 4.0 s ago: stopped at (1.20, 0.40) facing 90°")
	require.Contains(t, env.Text, "It may have moved since")
	var data struct {
		Base       robot.Pose2D    `json:"base"`
		LinkUp     bool            `json:"link_up"`
		Condition  robot.Condition `json:"condition"`
		Stale      bool            `json:"stale"`
		StateAgeMS int64           `json:"state_age_ms"`
	}
	require.NoError(t, json.Unmarshal(env.Data, &data), string(env.Data))
	require.InDelta(t, 1.2, data.Base.X, 1e-9)
	require.InDelta(t, 0.4, data.Base.Y, 1e-9)
	require.False(t, data.LinkUp)
	require.Equal(t, robot.ConditionLinkDown, data.Condition)
	require.True(t, data.Stale)
	require.EqualValues(t, 4000, data.StateAgeMS)
	require.NotContains(t, string(env.Data), "0001-01-01", "a robot that sends no stamp has none in data")
	require.Equal(t, "robot link down; last seen at (1.20, 0.40) facing 90° 4.0 s ago (no state since), gripper open, battery 87%, no task running", env.Robot)

	// Given no state was ever received
	h2 := newHarness(t, func(c *Conf) { c.Robot = noRobot{} })
	// When the agent reads the state
	env = h2.call("get_robot_state", nil)
	// Then it is UNAVAILABLE with a wait and no data: there is nothing to give
	require.Equal(t, toolerr.Unavailable, env.Error.Type)
	require.Positive(t, env.Error.RetryAfterMS)
	require.Empty(t, env.Data)
}

func TestStop_EnvelopeSaysStoppedOnlyFromAStateAfterTheStop(t *testing.T) {
	tests := []struct {
		name string
		// after is how long after the stop the newest state was
		// received; 0: none since.
		after time.Duration
		state robot.State
		want  string
	}{
		{
			"no state since the stop, last one moving", 0, moving(),
			"stop sent, not confirmed; last seen moving at (1.20, 0.40) facing 90° 0.0 s ago (before the stop), gripper open, battery 87%, no task running",
		},
		{
			"no state since the stop, last one at rest", 0, testState(),
			"stop sent, not confirmed; last seen at (1.20, 0.40) facing 90° 0.0 s ago (before the stop), gripper open, battery 87%, no task running",
		},
		{
			"a state after the stop shows rest", 5 * time.Millisecond, testState(),
			"stopped at (1.20, 0.40) facing 90°, gripper open, battery 87%, no task running",
		},
		{
			"a state after the stop still shows motion", 5 * time.Millisecond, moving(),
			"stop sent, not confirmed; moving at (1.20, 0.40) facing 90°, gripper open, battery 87%, no task running",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a robot whose newest state arrives tc.after after the
			// stop (the fake clock moves only when a state arrives)
			h := newHarness(t)
			stopped := false
			h.tasks.StopFn = func(context.Context, string, string) (actions.StopReport, error) {
				stopped = true
				return actions.StopReport{Text: "stop sent; no task was running", State: tc.state}, nil
			}
			h.robot.LatestFn = func(context.Context) (robot.State, error) {
				if stopped && tc.after > 0 {
					h.clock.Advance(tc.after)
				}
				return tc.state, nil
			}
			// When the agent calls stop
			env := h.call("stop", nil)
			// Then "stopped" appears only when that later state shows rest
			require.True(t, env.OK)
			require.Equal(t, tc.want, env.Robot)
		})
	}
}
