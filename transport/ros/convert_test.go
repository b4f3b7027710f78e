package ros

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/bluenviron/goroslib/v2/pkg/msgs/geometry_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/nav_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/sensor_msgs"
	"github.com/bluenviron/goroslib/v2/pkg/msgs/vision_msgs"
	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

func TestOdomToBase(t *testing.T) {
	tests := []struct {
		name    string
		q       geometry_msgs.Quaternion
		x       float64
		wantErr bool
		theta   float64
	}{
		{name: "facing +y", q: QuaternionFromYaw(math.Pi / 2), x: 1, theta: math.Pi / 2},
		{name: "unnormalised quaternion is normalised", q: geometry_msgs.Quaternion{Z: 2, W: 2}, theta: math.Pi / 2},
		{name: "zero quaternion", q: geometry_msgs.Quaternion{}, wantErr: true},
		{name: "NaN orientation", q: geometry_msgs.Quaternion{W: math.NaN()}, wantErr: true},
		{name: "NaN position", q: QuaternionFromYaw(0), x: math.NaN(), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &nav_msgs.Odometry{}
			m.Pose.Pose.Position.X = tc.x
			m.Pose.Pose.Orientation = tc.q
			p, _, err := OdomToBase(m)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrBadMessage)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.theta, p.Theta, 1e-9)
		})
	}
}

func TestJointStateSamples(t *testing.T) {
	want := map[string]bool{"a": true, "b": true}
	tests := []struct {
		name    string
		m       sensor_msgs.JointState
		wantErr bool
		got     map[string]JointSample
	}{
		{
			name: "other order and unknown names", m: sensor_msgs.JointState{Name: []string{"x", "b", "a"}, Position: []float64{9, 2, 1}},
			got: map[string]JointSample{"a": {Position: 1}, "b": {Position: 2}},
		},
		{
			name: "partial message (gripper published apart)", m: sensor_msgs.JointState{Name: []string{"a"}, Position: []float64{1}, Velocity: []float64{0.5}},
			got: map[string]JointSample{"a": {Position: 1, Velocity: 0.5}},
		},
		{name: "fewer positions than names", m: sensor_msgs.JointState{Name: []string{"a", "b"}, Position: []float64{1}}, wantErr: true},
		{name: "velocity length mismatch", m: sensor_msgs.JointState{Name: []string{"a"}, Position: []float64{1}, Velocity: []float64{1, 2}}, wantErr: true},
		{name: "NaN position", m: sensor_msgs.JointState{Name: []string{"a"}, Position: []float64{math.NaN()}}, wantErr: true},
		{name: "duplicate name", m: sensor_msgs.JointState{Name: []string{"a", "a"}, Position: []float64{1, 2}}, wantErr: true},
		{name: "NaN on an ignored joint is fine", m: sensor_msgs.JointState{Name: []string{"z"}, Position: []float64{math.NaN()}}, got: map[string]JointSample{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JointStateSamples(&tc.m, want)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrBadMessage)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.got, got)
		})
	}
}

func TestBatteryFromMsg(t *testing.T) {
	b, ok := BatteryFromMsg(&sensor_msgs.BatteryState{Percentage: 0.87, Voltage: 24})
	require.True(t, ok)
	require.InDelta(t, 87, b.Percent, 1e-6)
	b, ok = BatteryFromMsg(&sensor_msgs.BatteryState{Percentage: float32(math.NaN()), Charge: 5, Capacity: 10})
	require.True(t, ok, "percentage derived from charge/capacity")
	require.InDelta(t, 50, b.Percent, 1e-6)
	_, ok = BatteryFromMsg(&sensor_msgs.BatteryState{Percentage: float32(math.NaN()), Charge: float32(math.NaN())})
	require.False(t, ok, "an unmeasured battery keeps the previous reading")
}

func TestDetectionsFromMsg(t *testing.T) {
	m := &vision_msgs.Detection2DArray{}
	d := vision_msgs.Detection2D{Bbox: vision_msgs.BoundingBox2D{Center: geometry_msgs.Pose2D{X: 100, Y: 50}, SizeX: 20, SizeY: 10}}
	d.Results = []vision_msgs.ObjectHypothesisWithPose{{Id: 1, Score: 0.4}, {Id: 0, Score: 0.9}}
	d.Results[1].Pose.Pose.Position.Z = 2.5
	bad := vision_msgs.Detection2D{Bbox: vision_msgs.BoundingBox2D{SizeX: math.NaN()}, Results: []vision_msgs.ObjectHypothesisWithPose{{Score: 1}}}
	m.Detections = []vision_msgs.Detection2D{d, bad, {}}
	got, err := DetectionsFromMsg(m, LabelsFrom([]string{"cup", "bottle"}), time.Unix(100, 0))
	require.NoError(t, err)
	require.Len(t, got, 1, "the NaN box and the empty detection are skipped")
	require.Equal(t, "cup", got[0].Label)
	require.Equal(t, [4]float64{90, 45, 110, 55}, got[0].BBox)
	require.InDelta(t, 2.5, got[0].Depth, 1e-9)
	require.Equal(t, "class_7", LabelsFrom(nil)(7))
}

func TestArmGoalRoundTrip(t *testing.T) {
	// Given a 2-joint arm and a goal at 50 % speed
	joints := []hwconfig.JointConf{{Name: "j1", Min: -3, Max: 3, MaxVelocity: 1}, {Name: "j2", Min: -3, Max: 3, MaxVelocity: 2}}
	g := robot.ArmGoal{Positions: []float64{1, -1}, VelocityScale: 0.5}
	// When it is sent as a trajectory and decoded by the robot side
	m := ArmGoalToMsg(g, joints, []float64{0, 0})
	require.Equal(t, 2*time.Second, m.Goal.Trajectory.Points[0].TimeFromStart, "the slowest joint sets the time")
	back, err := ArmGoalFromMsg(&m.Goal, joints, []float64{0, 0})
	// Then the positions and the speed scale survive
	require.NoError(t, err)
	require.Equal(t, g.Positions, back.Positions)
	require.InDelta(t, 0.5, back.VelocityScale, 1e-9)
	// And a trajectory that misses a joint is refused
	m.Goal.Trajectory.JointNames = []string{"j1", "zz"}
	_, err = ArmGoalFromMsg(&m.Goal, joints, []float64{0, 0})
	require.ErrorIs(t, err, ErrBadMessage)
}

func TestHoldGoalToMsg_NeverDueAtOnceAndWithinTheVelocityLimits(t *testing.T) {
	joints := []hwconfig.JointConf{{Name: "j1", Min: -3, Max: 3, MaxVelocity: 1}, {Name: "j2", Min: -3, Max: 3, MaxVelocity: 0.5}}
	tests := []struct {
		name      string
		hold, cur []float64
		min, want time.Duration
	}{
		{name: "arm exactly at the hold: one control period, not zero", hold: []float64{0.3, -0.2}, cur: []float64{0.3, -0.2}, min: 20 * time.Millisecond, want: 20 * time.Millisecond},
		{name: "a few mrad away: still one control period", hold: []float64{0.3, -0.2}, cur: []float64{0.305, -0.201}, min: 20 * time.Millisecond, want: 20 * time.Millisecond},
		{name: "further than a control period at the limits: the slowest joint sets the time", hold: []float64{0.3, -0.2}, cur: []float64{0.2, -0.1}, min: 20 * time.Millisecond, want: 200 * time.Millisecond},
		{name: "no control period given: the default one", hold: []float64{0, 0}, cur: []float64{0, 0}, want: hwconfig.DefaultControlPeriod},
		{name: "an absurd estimate does not overflow into a jump", hold: []float64{0, 0}, cur: []float64{1e300, 0}, min: 20 * time.Millisecond, want: time.Duration(math.MaxInt64)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// When a stop builds its hold
			m := HoldGoalToMsg(joints, tc.hold, tc.cur, tc.min)

			// Then it is one point at the hold positions, at rest, due no
			// sooner than the velocity limits allow and never at once
			tr := m.Goal.Trajectory
			require.Equal(t, []string{"j1", "j2"}, tr.JointNames)
			require.Len(t, tr.Points, 1)
			p := tr.Points[0]
			require.Equal(t, tc.hold, p.Positions)
			require.Equal(t, []float64{0, 0}, p.Velocities)
			require.Equal(t, tc.want, p.TimeFromStart)
			for i, j := range joints {
				require.GreaterOrEqual(t, p.TimeFromStart.Seconds()*j.MaxVelocity, math.Min(math.Abs(tc.hold[i]-tc.cur[i]), 1e9),
					"joint %s would exceed its velocity limit", j.Name)
			}
		})
	}
}

// FuzzIncoming feeds arbitrary odometry, joint state, battery and detection
// messages to the conversions: they must never panic, and whatever they
// accept must be finite (so the state stays encodable as JSON).
func FuzzIncoming(f *testing.F) {
	f.Add(1.0, 2.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.1, uint8(2), uint8(2), 0.9, 100.0, 20.0, int64(0), "a", float32(0.5))
	f.Add(math.NaN(), 0.0, 0.0, 0.0, 0.0, 0.0, math.Inf(1), 0.0, uint8(3), uint8(1), math.NaN(), -1.0, math.NaN(), int64(-5), "zz", float32(math.NaN()))
	f.Add(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, uint8(255), uint8(0), 0.0, 0.0, 0.0, int64(1<<40), "", float32(2))
	want := map[string]bool{"a": true, "b": true}
	f.Fuzz(func(t *testing.T, x, y, qx, qy, qz, qw, v, w float64, nNames, nPos uint8, score, cx, sx float64, id int64, name string, pct float32) {
		o := &nav_msgs.Odometry{}
		o.Pose.Pose.Position.X, o.Pose.Pose.Position.Y = x, y
		o.Pose.Pose.Orientation = geometry_msgs.Quaternion{X: qx, Y: qy, Z: qz, W: qw}
		o.Twist.Twist.Linear.X, o.Twist.Twist.Angular.Z = v, w
		if p, tw, err := OdomToBase(o); err == nil {
			_, jerr := json.Marshal(robot.State{Base: p, Velocity: tw})
			require.NoError(t, jerr)
		}
		// Huge and mismatched arrays: nNames names, nPos positions.
		js := &sensor_msgs.JointState{}
		for i := 0; i < int(nNames)*4; i++ {
			js.Name = append(js.Name, []string{"a", "b", name}[i%3])
		}
		for i := 0; i < int(nPos)*4; i++ {
			js.Position = append(js.Position, x)
		}
		if got, err := JointStateSamples(js, want); err == nil {
			for _, s := range got {
				require.True(t, finite(s.Position, s.Velocity))
			}
		}
		if b, ok := BatteryFromMsg(&sensor_msgs.BatteryState{Percentage: pct, Voltage: float32(v)}); ok {
			require.True(t, finite(b.Percent, b.Voltage))
			require.True(t, b.Percent >= 0 && b.Percent <= 100)
		}
		dm := &vision_msgs.Detection2DArray{}
		for i := 0; i < int(nNames); i++ {
			d := vision_msgs.Detection2D{Bbox: vision_msgs.BoundingBox2D{Center: geometry_msgs.Pose2D{X: cx, Y: cx}, SizeX: sx, SizeY: sx}}
			d.Results = []vision_msgs.ObjectHypothesisWithPose{{Id: id, Score: score}}
			d.Results[0].Pose.Pose.Position.Z = y
			dm.Detections = append(dm.Detections, d)
		}
		if ds, err := DetectionsFromMsg(dm, LabelsFrom([]string{"cup"}), time.Unix(1, 0)); err == nil {
			for _, d := range ds {
				require.True(t, finite(d.BBox[0], d.BBox[1], d.BBox[2], d.BBox[3], d.Confidence, d.Depth))
				require.True(t, d.Confidence >= 0 && d.Confidence <= 1)
			}
		} else {
			require.ErrorIs(t, err, ErrBadMessage)
		}
	})
}
