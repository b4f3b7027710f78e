package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/std_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// BenchmarkInit_200Topics measures `robot-bridge init` (the built binary,
// process start included) against a master with at least 200 topics: the
// rospy robot's /odom, /cmd_vel and move_base, and a crowd of other
// publishers, as on a real robot with its sensors and diagnostics. The
// figure is the time from starting init to a written, valid config
// (goal: < 2 s), reported as ms/config.
func BenchmarkInit_200Topics(b *testing.B) {
	m := rostest.StartMaster(b)
	startOdomRobotB(b, m)
	crowd(b, m, 200)
	types, err := m.Client("/bench").GetTopicTypes()
	require.NoError(b, err)
	require.GreaterOrEqual(b, len(types), 200, "the master knows %d topics", len(types))
	bin := buildBinaryB(b)
	out := filepath.Join(b.TempDir(), "robot.yaml")
	env := m.Env(b)

	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		code, stdout, stderr := runEnv(b, env, bin, "init", "--ros-master", m.URI, "--out", out, "--force")
		total += time.Since(start)
		if code != 0 {
			b.Fatalf("init failed (%d):\n%s%s", code, stdout, stderr)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/config")
	b.ReportMetric(float64(len(types)), "topics")
	cfg, err := hwconfig.Load(out)
	require.NoError(b, err)
	require.Equal(b, "/move_base", cfg.Transport.ROS.MoveBaseAction)
}

// crowd adds publishers until the master knows n topics, in one node, of
// a few standard types.
func crowd(b *testing.B, m *rostest.Master, n int) {
	b.Helper()
	node, err := goroslib.NewNode(goroslib.NodeConf{
		MasterAddress: m.HostPort, Name: "crowd", Host: "127.0.0.1",
		LogDestinations: goroslib.LogDestinationCallback, OnLog: func(goroslib.LogLevel, string) {},
	})
	require.NoError(b, err)
	b.Cleanup(node.Close)
	msgs := []any{&std_msgs.Float64{}, &std_msgs.String{}, &sensor_msgs.Imu{}, &sensor_msgs.LaserScan{}, &geometry_msgs.PoseStamped{}, &std_msgs.Bool{}}
	for i := 0; ; i++ {
		types, err := m.Client("/bench").GetTopicTypes()
		require.NoError(b, err)
		if len(types) >= n {
			return
		}
		p, err := goroslib.NewPublisher(goroslib.PublisherConf{Node: node, Topic: fmt.Sprintf("/sensors/group%d/topic%d", i%10, i), Msg: msgs[i%len(msgs)]})
		require.NoError(b, err)
		b.Cleanup(p.Close)
	}
}

// startOdomRobotB is startOdomRobot for a benchmark.
func startOdomRobotB(b *testing.B, m *rostest.Master) {
	b.Helper()
	py := rostest.RequirePython(b, odomRobotModules)
	script, err := filepath.Abs(filepath.Join("testdata", "odom_movebase_robot.py"))
	require.NoError(b, err)
	p := rostest.Start(b, m.Env(b), py, script, "__name:=odom_robot")
	rostest.Eventually(b, 30*time.Second, func() bool {
		if done, err := p.Exited(); done {
			b.Fatalf("odom_movebase_robot.py exited (%v):\n%s", err, p.Output())
		}
		return len(m.Publishers("/move_base/status")) > 0 && len(m.Publishers("/odom")) > 0
	}, "odom_movebase_robot.py never came up")
}

// buildBinaryB builds robot-bridge for a benchmark.
func buildBinaryB(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "robot-bridge")
	code, stdout, stderr := runEnv(b, os.Environ(), "go", "build", "-o", bin, ".")
	require.Equal(b, 0, code, "go build: %s%s", stdout, stderr)
	return bin
}
