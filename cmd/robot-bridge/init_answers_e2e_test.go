package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros/rostest"
)

// What the agent is told about a robot bridged from init's config: a goal
// the robot's move_base reported SUCCEEDED off the requested heading ends
// succeeded with the bridge's second opinion (the measured error and the
// tolerance) in the task's data and text, and get_safety_status says the
// robot has no hardware e-stop.

func TestInit_SucceededOffHeadingIsASuccessThatSaysSo(t *testing.T) {
	// Given the bridge on init's config (yaw_tolerance_deg 5) and a robot
	// whose move_base ends every goal 27° off the requested heading and
	// reports it SUCCEEDED
	m := rostest.StartMaster(t)
	robot := startOdomRobot(t, m, 0, 0, 0, "_yaw_offset_deg:=27")
	bin := buildBinary(t)
	p, cfg, _ := initAndServe(t, m, bin)
	require.InDelta(t, hwconfig.StarterYawToleranceDeg, cfg.Base.YawToleranceDeg, 1e-9)

	// When an approved move_base_to asks for heading 0°
	env := p.call(t, "move_base_to", map[string]any{"arguments": map[string]any{"x": 0.5, "y": 0.0, "theta_deg": 0}, "session_id": "init-e2e-heading"})
	require.Equal(t, true, env["ok"], "%v", env)
	env = approveAndWait(t, p, env["task"].(map[string]any)["id"].(string))

	// Then the robot's verdict stands — the task succeeded, no stall, no
	// ACTION_FAILED — and the bridge's second opinion is in data and text
	// with the measured error and the tolerance
	data := env["data"].(map[string]any)
	require.Equal(t, "succeeded", data["status"], "%v\nrobot:\n%s", env, robot.proc.Output())
	want := "heading 27° off the requested 0°, outside the 5° tolerance"
	text, _ := env["text"].(string)
	require.Contains(t, text, want, "the envelope's text must carry the warning: %v", env)
	require.Contains(t, fmt.Sprint(data), want, "the task's data must carry the warning: %v", env)
}

func TestInit_SafetyStatusSaysTheRobotHasNoHardwareEStop(t *testing.T) {
	// Given the bridge on init's config for a robot without an e-stop topic
	m := rostest.StartMaster(t)
	startOdomRobot(t, m, 0, 0, 0)
	bin := buildBinary(t)
	p, _, _ := initAndServe(t, m, bin)

	// When the agent asks for the safety status
	env := p.call(t, "get_safety_status", map[string]any{"arguments": map[string]any{}, "session_id": "init-e2e-safety"})
	require.Equal(t, true, env["ok"], "%v", env)

	// Then it says the robot reports no hardware e-stop, so the software
	// e-stop is the only one — in data and in text
	data := env["data"].(map[string]any)
	require.Equal(t, false, data["hardware_estop"], "get_safety_status data must say hardware_estop: false: %v", env)
	text, _ := env["text"].(string)
	require.Contains(t, text, "no hardware e-stop", "%v", env)
}
