package rosmsg

import (
	"testing"

	"github.com/bluenviron/goroslib/v2/pkg/msgproc"
	"github.com/stretchr/testify/require"
)

// TestMD5MatchesROS pins every type's name and MD5 sum to the real ROS
// ones: move_base_msgs from Debian's python3-move-base-msgs
// (MoveBaseActionGoal._md5sum etc.), control_msgs action goals from
// rosserial's generated headers. A peer with another sum refuses to
// connect, so a wrong field here would silently cut the robot off.
func TestMD5MatchesROS(t *testing.T) {
	tests := []struct {
		name string
		msg  any
		typ  string
		md5  string
	}{
		{"move_base goal envelope", MoveBaseActionGoal{}, "move_base_msgs/MoveBaseActionGoal", "660d6895a1b9a16dce51fbdd9a64a56b"},
		{"move_base result envelope", MoveBaseActionResult{}, "move_base_msgs/MoveBaseActionResult", "1eb06eeff08fa7ea874431638cb52332"},
		{"move_base feedback envelope", MoveBaseActionFeedback{}, "move_base_msgs/MoveBaseActionFeedback", "7d1870ff6e0decea702b943b5af0b42e"},
		{"move_base goal", MoveBaseGoal{}, "move_base_msgs/MoveBaseGoal", "257d089627d7eb7136c24d3593d05a16"},
		{"follow_joint_trajectory goal envelope", FollowJointTrajectoryActionGoal{}, "control_msgs/FollowJointTrajectoryActionGoal", "cff5c1d533bf2f82dd0138d57f4304bb"},
		{"gripper_command goal envelope", GripperCommandActionGoal{}, "control_msgs/GripperCommandActionGoal", "aa581f648a35ed681db2ec0bf7a82bea"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			typ, err := msgproc.Type(tc.msg)
			require.NoError(t, err)
			require.Equal(t, tc.typ, typ)
			sum, err := msgproc.MD5(tc.msg)
			require.NoError(t, err)
			require.Equal(t, tc.md5, sum)
		})
	}
}
