package ros

import (
	"slices"
	"strings"
	"testing"

	"github.com/bluenviron/goroslib/v2/pkg/apimaster"
	"github.com/stretchr/testify/require"
)

// graphOf builds a graph from "name type pub1,pub2 sub1,sub2" lines ("-"
// for no nodes), as a master would answer.
func graphOf(lines ...string) *Graph {
	var types []apimaster.TopicType
	st := &apimaster.SystemState{}
	for _, l := range lines {
		f := strings.Fields(l)
		types = append(types, apimaster.TopicType{Name: f[0], Type: f[1]})
		if f[2] != "-" {
			st.PublishedTopics = append(st.PublishedTopics, apimaster.SystemStateEntry{Name: f[0], Nodes: strings.Split(f[2], ",")})
		}
		if f[3] != "-" {
			st.SubscribedTopics = append(st.SubscribedTopics, apimaster.SystemStateEntry{Name: f[0], Nodes: strings.Split(f[3], ",")})
		}
	}
	return buildGraph("http://robot:11311", types, st, nil)
}

// actionLines are the five topics of an action server served by node.
func actionLines(ns, typ, node string) []string {
	return []string{
		ns + "/goal " + typ + "ActionGoal - " + node,
		ns + "/cancel actionlib_msgs/GoalID - " + node,
		ns + "/status actionlib_msgs/GoalStatusArray " + node + " -",
		ns + "/feedback " + typ + "ActionFeedback " + node + " -",
		ns + "/result " + typ + "ActionResult " + node + " -",
	}
}

func TestGraph_RecognisesActionServersByTheirTopics(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []ActionServer
	}{
		{
			"move_base", actionLines("/move_base", "move_base_msgs/MoveBase", "/robot"),
			[]ActionServer{{Name: "/move_base", Type: TypeMoveBase, Node: "/robot"}},
		},
		{
			"namespaced arm", actionLines("/arm/follow_joint_trajectory", "control_msgs/FollowJointTrajectory", "/ctrl"),
			[]ActionServer{{Name: "/arm/follow_joint_trajectory", Type: TypeFollowJointTrj, Node: "/ctrl"}},
		},
		{"a client only is no server", []string{
			"/move_base/goal move_base_msgs/MoveBaseActionGoal /client -",
			"/move_base/cancel actionlib_msgs/GoalID /client -",
			"/move_base/status actionlib_msgs/GoalStatusArray - /client",
			"/move_base/feedback move_base_msgs/MoveBaseActionFeedback - /client",
			"/move_base/result move_base_msgs/MoveBaseActionResult - /client",
		}, nil},
		{"a missing result topic is no server", actionLines("/move_base", "move_base_msgs/MoveBase", "/robot")[:4], nil},
		{"a goal topic of another type is no server", []string{
			"/odd/goal std_msgs/String - /robot", "/odd/cancel actionlib_msgs/GoalID - /robot",
			"/odd/status actionlib_msgs/GoalStatusArray /robot -", "/odd/feedback std_msgs/String /robot -", "/odd/result std_msgs/String /robot -",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given a graph, When it is read, Then its action servers are
			// exactly those whose five topics one node serves
			require.Equal(t, tt.want, graphOf(tt.lines...).Actions)
		})
	}
}

func TestGraph_MatchesTheStandardInterfaces(t *testing.T) {
	// Given a graph with a robot's interfaces and some noise
	lines := []string{
		"/odom nav_msgs/Odometry /robot /rviz",
		"/odometry/filtered nav_msgs/Odometry /ekf -",
		"/cmd_vel geometry_msgs/Twist /teleop /robot",
		"/cmd_vel_raw geometry_msgs/Twist /mux -",
		"/battery_state sensor_msgs/BatteryState /bms -",
		"/safety/estop std_msgs/Bool /safety -",
		"/door_open std_msgs/Bool /door -",
		"/joint_states sensor_msgs/JointState /robot -",
		"/camera/detections vision_msgs/Detection2DArray /yolo -",
	}
	lines = append(lines, actionLines("/move_base", "move_base_msgs/MoveBase", "/robot")...)
	lines = append(lines, actionLines("/arm_controller/follow_joint_trajectory", "control_msgs/FollowJointTrajectory", "/ctrl")...)

	// When it is matched
	m := graphOf(lines...).Match()

	// Then the conventional names win, the others are noted, and a Bool
	// that is not an e-stop is not taken for one
	require.Equal(t, "/odom", m.Odom)
	require.Equal(t, "/cmd_vel", m.CmdVel, "only a topic the robot subscribes to takes velocity commands")
	require.Equal(t, "/move_base", m.MoveBase)
	require.Equal(t, "/battery_state", m.Battery)
	require.Equal(t, "/safety/estop", m.EStop)
	require.Equal(t, "/joint_states", m.JointStates)
	require.Equal(t, "/camera/detections", m.Detections)
	require.Equal(t, "/arm_controller/follow_joint_trajectory", m.Arm)
	require.Empty(t, m.Gripper)
	require.Len(t, m.Notes, 1)
	require.Contains(t, m.Notes[0], "chose /odom among /odometry/filtered")
}

func TestGraph_MatchOfABareRobot(t *testing.T) {
	// Given a robot with only odometry under another name and a Twist
	// nobody listens to
	m := graphOf("/base/odom nav_msgs/Odometry /robot -", "/cmd_vel geometry_msgs/Twist /teleop -").Match()

	// Then odometry is found, and nothing else is claimed
	require.Equal(t, "/base/odom", m.Odom)
	require.Empty(t, m.CmdVel)
	require.Empty(t, m.MoveBase)
	require.Empty(t, m.EStop)
	require.Empty(t, m.Battery)
	require.Empty(t, m.Notes)
}

func TestGraph_ExcludesTheCaller(t *testing.T) {
	// Given a master whose only subscriber of /cmd_vel is the caller itself
	st := &apimaster.SystemState{SubscribedTopics: []apimaster.SystemStateEntry{{Name: "/cmd_vel", Nodes: []string{"/me"}}}}
	g := buildGraph("http://x:11311", []apimaster.TopicType{{Name: "/cmd_vel", Type: TypeTwist}}, st, []string{"/me"})

	// Then nobody subscribes to it
	require.Empty(t, g.Subscribed(TypeTwist))
}

func FuzzGraphMatch(f *testing.F) {
	f.Add("/odom", "nav_msgs/Odometry", "/r", "/move_base/goal", "move_base_msgs/MoveBaseActionGoal", "/r")
	f.Add("", "", "", "/goal", "ActionGoal", "")
	f.Add("/a/estop", "std_msgs/Bool", "/x", "/b//goal", "x/yActionGoal", "/y,/z")
	f.Fuzz(func(t *testing.T, n1, t1, p1, n2, t2, s2 string) {
		// Given any master answer
		types := []apimaster.TopicType{{Name: n1, Type: t1}, {Name: n2, Type: t2}}
		st := &apimaster.SystemState{
			PublishedTopics:  []apimaster.SystemStateEntry{{Name: n1, Nodes: strings.Split(p1, ",")}},
			SubscribedTopics: []apimaster.SystemStateEntry{{Name: n2, Nodes: strings.Split(s2, ",")}},
		}
		// When it is read and matched
		g := buildGraph("http://x:11311", types, st, nil)
		m := g.Match()
		// Then it does not panic, and every match is a topic of its type
		// with a publisher (or subscriber, for cmd_vel)
		for name, typ := range map[string]string{m.Odom: TypeOdometry, m.Battery: TypeBatteryState, m.EStop: TypeBool, m.JointStates: TypeJointState, m.Detections: TypeDetections} {
			if name == "" {
				continue
			}
			require.True(t, slices.ContainsFunc(g.Published(typ), func(x GraphTopic) bool { return x.Name == name }), "%s is not a published %s", name, typ)
		}
		if m.CmdVel != "" {
			require.True(t, slices.ContainsFunc(g.Subscribed(TypeTwist), func(x GraphTopic) bool { return x.Name == m.CmdVel }))
		}
	})
}
