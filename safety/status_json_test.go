package safety

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStatusJSON_DurationsInMillisecondsAbsentTimesAbsent pins the wire
// form of get_safety_status and /v1/safety: every duration is whole
// milliseconds in a field named _ms (never a bare time.Duration in
// nanoseconds), and a time or an age that does not exist is left out
// rather than written as 0001-01-01T00:00:00Z or 0.
func TestStatusJSON_DurationsInMillisecondsAbsentTimesAbsent(t *testing.T) {
	mon := MonitorConf{
		ControlPeriod: 20 * time.Millisecond, StateTimeout: 500 * time.Millisecond,
		StallTimeout: 3 * time.Second, SafePose: "stowed", SafePoseTimeout: 15 * time.Second,
		SpeedScale: 0.3, GripperOnSafe: "hold", Preauthorized: true,
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		st   Status
		want string
	}{
		{
			name: "no state yet, nothing latched",
			st:   Status{LinkUp: true, Monitors: mon},
			want: `{"estop":{"active":false},"fault":{"latched":false},"link_up":true,"have_state":false,"robot_estop":false,"hardware_estop":false,
				"monitors":{"safe_pose":"stowed","speed_scale":0.3,"gripper_on_safe":"hold","recovery_preauthorized":true,
				"control_period_ms":20,"state_timeout_ms":500,"stall_timeout_ms":3000,"safe_pose_timeout_ms":15000}}`,
		},
		{
			name: "a state 12.4 s old, e-stop and fault latched, a motion supervised",
			st: Status{
				EStop:     EStopStatus{Active: true, By: "alice", Reason: "test", Since: since},
				Fault:     FaultStatus{Latched: true, Reason: "recovery failed", TaskID: "task-1", Since: since},
				HaveState: true, LastStateAge: 12400 * time.Millisecond,
				Active:   &ActiveMotion{TaskID: "task-2", Tool: "move_base_to", Phase: PhaseExecuting, Since: since},
				Monitors: mon,
			},
			want: `{"estop":{"active":true,"by":"alice","reason":"test","since":"2026-01-02T03:04:05Z"},
				"fault":{"latched":true,"reason":"recovery failed","task_id":"task-1","since":"2026-01-02T03:04:05Z"},
				"link_up":false,"have_state":true,"robot_estop":false,"hardware_estop":false,
				"active":{"task_id":"task-2","tool":"move_base_to","phase":"executing","since":"2026-01-02T03:04:05Z"},
				"monitors":{"safe_pose":"stowed","speed_scale":0.3,"gripper_on_safe":"hold","recovery_preauthorized":true,
				"control_period_ms":20,"state_timeout_ms":500,"stall_timeout_ms":3000,"safe_pose_timeout_ms":15000},
				"last_state_age_ms":12400}`,
		},
		{
			name: "a fresh state has an age of 0 ms, present",
			st:   Status{HaveState: true, Monitors: mon},
			want: `{"estop":{"active":false},"fault":{"latched":false},"link_up":false,"have_state":true,"robot_estop":false,"hardware_estop":false,
				"monitors":{"safe_pose":"stowed","speed_scale":0.3,"gripper_on_safe":"hold","recovery_preauthorized":true,
				"control_period_ms":20,"state_timeout_ms":500,"stall_timeout_ms":3000,"safe_pose_timeout_ms":15000},
				"last_state_age_ms":0}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given a supervisor status
			// When it is written as JSON
			raw, err := json.Marshal(tc.st)
			require.NoError(t, err)
			// Then it has exactly the documented fields and units
			require.JSONEq(t, tc.want, string(raw))
			// And it reads back to the same status
			var back Status
			require.NoError(t, json.Unmarshal(raw, &back))
			require.Equal(t, tc.st, back)
		})
	}
}
