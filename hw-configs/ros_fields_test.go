package hwconfig

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The optional ROS keys heartbeat_topic and class_labels, with their own
// fixtures in testdata/ros (kept apart from testdata/good and testdata/bad,
// whose tables describe the shipped robots).

func TestROSFields_FixtureKeepsHeartbeatAndLabels(t *testing.T) {
	// Given a ROS config that names its heartbeat topic and class labels
	// When it is loaded
	c, err := Load(filepath.Join("testdata", "ros", "heartbeat-and-labels.yaml"))

	// Then both survive defaults and validation unchanged
	require.NoError(t, err)
	require.Equal(t, "/watchdog/bridge_alive", c.Transport.ROS.HeartbeatTopic)
	require.Equal(t, []string{"cup", "bottle", "box"}, c.Transport.ROS.ClassLabels)
}

func TestROSFields_Defaults(t *testing.T) {
	// Given a ROS config that sets neither key
	c := decodeFixture(t, "testdata/good/base-only-ros.yaml")

	// When defaults are applied
	c.ApplyDefaults()

	// Then the heartbeat is private to the bridge's node and the labels
	// are left to the ROS parameter
	require.Equal(t, "~heartbeat", c.Transport.ROS.HeartbeatTopic)
	require.Equal(t, DefaultROSHeartbeatTopic, c.Transport.ROS.HeartbeatTopic)
	require.Empty(t, c.Transport.ROS.ClassLabels)
	require.NoError(t, c.Validate())
}

func TestROSFields_BadFixtureNamesTheEntry(t *testing.T) {
	// Given a fixture whose class id 2 repeats the label of id 0
	// When it is loaded
	c, err := Load(filepath.Join("testdata", "ros", "bad-duplicate-class-label.yaml"))

	// Then it is refused naming the entry, and the problem points at a line
	require.Nil(t, c)
	fe := requireProblem(t, err, "transport.ros.class_labels[2]", "distinct, non-empty labels")
	require.Contains(t, fe.Problem, "class_labels[0]")
	require.Positive(t, fe.Line)
}

func TestROSFields_ValidateRejectsEachDefect(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		field   string
		allowed string
	}{
		{
			"heartbeat topic with a space", func(c *Config) { c.Transport.ROS.HeartbeatTopic = "bridge alive" },
			"transport.ros.heartbeat_topic", "ROS graph name",
		},
		{
			"heartbeat topic starting with a digit", func(c *Config) { c.Transport.ROS.HeartbeatTopic = "/1hb" },
			"transport.ros.heartbeat_topic", "ROS graph name",
		},
		{
			"empty label", func(c *Config) { c.Transport.ROS.ClassLabels = []string{"cup", ""} },
			"transport.ros.class_labels[1]", "non-empty",
		},
		{
			"label with a comma", func(c *Config) { c.Transport.ROS.ClassLabels = []string{"cup,mug"} },
			"transport.ros.class_labels[0]", "without commas",
		},
		{
			"label with surrounding spaces", func(c *Config) { c.Transport.ROS.ClassLabels = []string{" cup"} },
			"transport.ros.class_labels[0]", "without commas",
		},
		{
			"too many labels", func(c *Config) { c.Transport.ROS.ClassLabels = make([]string, MaxClassLabels+1) },
			"transport.ros.class_labels", "at most 1024",
		},
		{
			"labels without a camera", func(c *Config) { c.Camera = nil },
			"transport.ros.class_labels", "only with a camera",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given the good fixture with one ROS key broken
			c, err := Load(filepath.Join("testdata", "ros", "heartbeat-and-labels.yaml"))
			require.NoError(t, err)
			tt.mutate(c)

			// When it is validated
			err = c.Validate()

			// Then the problem names the key and what is allowed
			_ = requireProblem(t, err, tt.field, tt.allowed)
		})
	}
}
