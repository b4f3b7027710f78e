package bridge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/safety"
)

// TestDescribeSafety_StaleStateIsSaid: get_safety_status and the console
// said "robot link up" and "the robot's own e-stop is engaged" from a
// state however old; a robot gone silent must be said to be silent.
func TestDescribeSafety_StaleStateIsSaid(t *testing.T) {
	mon := safety.MonitorConf{StateTimeout: 500 * time.Millisecond}
	tests := []struct {
		name      string
		st        safety.Status
		want, not []string
	}{
		{
			name: "fresh state",
			st:   safety.Status{LinkUp: true, HaveState: true, LastStateAge: 20 * time.Millisecond, Monitors: mon},
			want: []string{"The robot link is up."},
			not:  []string{"no robot state"},
		},
		{
			name: "robot silent for 3 s, its e-stop last reported engaged",
			st:   safety.Status{LinkUp: true, HaveState: true, RobotEStop: true, LastStateAge: 3 * time.Second, Monitors: mon},
			want: []string{"no robot state for 3.0 s (state timeout 0.5 s).", "e-stop was engaged as last reported"},
			not:  []string{"e-stop is engaged"},
		},
		{
			name: "no state yet",
			st:   safety.Status{LinkUp: true, Monitors: mon},
			want: []string{"There has been no robot state yet."},
		},
		{
			name: "supervised motion named",
			st: safety.Status{
				LinkUp: true, HaveState: true, Monitors: mon,
				Active: &safety.ActiveMotion{TaskID: "task-1", Tool: "move_base_to", Phase: safety.PhaseRecovering},
			},
			want: []string{"Task task-1 (move_base_to) is recovering under supervision."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Given the supervisor's status, When it is put in words
			got := describeSafety(tc.st)
			// Then the words say how old the news is
			for _, w := range tc.want {
				require.Contains(t, got, w)
			}
			for _, n := range tc.not {
				require.NotContains(t, got, n)
			}
		})
	}
}
