package hwconfig

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFleet_ShippedFleetExpandsWithOverrides(t *testing.T) {
	// Given the shipped fleet config
	c, err := Load("mqtt-fleet.yaml")
	require.NoError(t, err)

	// When its robots are expanded
	robots, err := c.Robots()
	require.NoError(t, err)

	// Then there are ten, zero-padded, each its own robot with its own seed
	require.Len(t, robots, 10)
	require.Equal(t, "mqtt-fleet-01", robots[0].Robot.ID)
	require.Equal(t, "mqtt-fleet-10", robots[9].Robot.ID)
	for i, r := range robots {
		require.Nil(t, r.Fleet, "a robot's config is one robot")
		require.Equal(t, c.Sim.Seed+int64(i), r.Sim.Seed, r.Robot.ID)
		require.Equal(t, c.ToolNames(), r.ToolNames(), "every robot offers the same tools")
		require.NoError(t, r.Validate())
	}
	// And the overrides changed only what they name
	require.InDelta(t, 0.5, robots[1].Base.MaxLinearSpeed, 1e-12)
	require.Equal(t, "Older base with a slower drive", robots[1].Robot.Name)
	require.InDelta(t, c.Base.MaxAngularSpeed, robots[1].Base.MaxAngularSpeed, 1e-12, "an unnamed field keeps the template's value")
	require.InDelta(t, c.Base.MaxLinearSpeed, robots[0].Base.MaxLinearSpeed, 1e-12)
	dock := robots[2].Locations["dock"]
	require.InDelta(t, -4.0, dock.X, 1e-12)
	require.InDelta(t, 4.0, dock.Y, 1e-12)
	require.InDelta(t, 180, dock.ThetaDeg, 1e-12, "a location merges: theta_deg stays the template's")
	require.InDelta(t, -4.0, c.Locations["dock"].Y, 1e-12, "the template's own location is untouched")
	require.InDelta(t, -4.0, robots[0].Locations["dock"].Y, 1e-12)
	require.InDelta(t, -2.0, robots[2].Sim.Start.X, 1e-12)
	require.InDelta(t, 0.0, robots[3].Sim.Start.X, 1e-12)
	require.Equal(t, 20, c.MetricsRobotSeries())
}

func TestFleet_OneRobotConfigIsItsOwnFleet(t *testing.T) {
	c, err := Load(shippedConfig)
	require.NoError(t, err)
	robots, err := c.Robots()
	require.NoError(t, err)
	require.Equal(t, []*Config{c}, robots)
	require.Equal(t, []string{"sim-1"}, c.FleetIDs())
	require.False(t, c.IsFleet())
}

func TestFleet_IDsFromCountArePaddedToTheCountsWidth(t *testing.T) {
	c := &Config{Robot: RobotConf{ID: "amr"}, Fleet: &FleetConf{Count: 100}}
	ids := c.FleetIDs()
	require.Len(t, ids, 100)
	require.Equal(t, "amr-001", ids[0])
	require.Equal(t, "amr-100", ids[99])
	c.Fleet.IDPrefix = "bot_"
	require.Equal(t, "bot_007", c.FleetIDs()[6])
}

func TestFleet_DerivedDefaultsFollowTheOverride(t *testing.T) {
	// Given a template whose room outline defaults to its workspace, and a
	// robot whose workspace is smaller
	src := fleetSource(t, `
fleet:
  ids: [a, b]
  robots:
    b:
      base:
        workspace: [[-4.5, -4.5], [4.5, -4.5], [4.5, 4.6], [-4.5, 4.6]]
`, func(s string) string {
		return strings.Replace(s, "  bounds: [[-5, -5], [5, -5], [5, 5], [-5, 5]]\n", "", 1)
	})
	c, err := Parse([]byte(src))
	require.NoError(t, err)
	robots, err := c.Robots()
	require.NoError(t, err)

	// Then robot b's room defaults to its own workspace, not the template's
	require.Equal(t, robots[1].Base.Workspace, robots[1].World.Bounds)
	require.NotEqual(t, robots[0].World.Bounds, robots[1].World.Bounds)
}

func TestFleet_BadFleetsAreRefusedWithTheField(t *testing.T) {
	for name, tc := range map[string]struct{ fleet, field, words string }{
		"ids and count":     {"fleet: {ids: [a], count: 2}", "fleet", "gives both ids and count"},
		"no robots":         {"fleet: {id_prefix: x-}", "fleet", "names no robots"},
		"too many":          {"fleet: {count: 10001}", "fleet.count", "out of range"},
		"bad id":            {"fleet: {ids: [Amr]}", "fleet.ids[0]", "not a valid robot id"},
		"duplicate":         {"fleet: {ids: [a, a]}", "fleet.ids[1]", "listed twice"},
		"stranger override": {"fleet: {ids: [a], robots: {z: {sim: {seed: 1}}}}", "fleet.robots.z", "not in the fleet"},
		"transport":         {"fleet: {ids: [a], robots: {a: {transport: {kind: sim}}}}", "fleet.robots.a.transport", "cannot be overridden per robot"},
		"new location":      {"fleet: {ids: [a], robots: {a: {locations: {attic: {x: 1, y: 1}}}}}", "fleet.robots.a.locations.attic", "not one of the template's locations"},
		"id override":       {"fleet: {ids: [a], robots: {a: {robot: {id: b}}}}", "fleet.robots.a.robot.id", "cannot be overridden"},
		"bad limit":         {"fleet: {ids: [a], robots: {a: {base: {max_linear_speed: -1}}}}", "fleet.robots.a.base.max_linear_speed", ""},
		"unknown field":     {"fleet: {ids: [a], robots: {a: {base: {max_speed: 1}}}}", "fleet.robots.a", "max_speed"},
		"scalar override":   {"fleet: {ids: [a], robots: {a: 3}}", "fleet.robots.a", "mapping"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(fleetSource(t, tc.fleet, func(s string) string { return s })))
			require.Error(t, err)
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tc.field)
			require.Contains(t, err.Error(), tc.words)
		})
	}
}

func TestFleet_ROSFleetIsRefused(t *testing.T) {
	b, err := os.ReadFile("ros-sim.yaml")
	require.NoError(t, err)
	_, err = Parse(append(b, []byte("\nfleet: {ids: [a, b]}\n")...))
	require.ErrorContains(t, err, "a fleet over ROS1 is not supported")
}

// fleetSource is the shipped MQTT simulator config with a fleet section
// appended (edit may change the rest first).
func fleetSource(t *testing.T, fleet string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile("mqtt-sim.yaml")
	require.NoError(t, err)
	return fmt.Sprintf("%s\n%s\n", edit(string(b)), strings.TrimSpace(fleet))
}
