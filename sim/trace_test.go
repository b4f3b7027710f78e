package sim

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// newTraceSim builds a simulator from the default config with opts.
func newTraceSim(t testing.TB, opts []Option, muts ...func(*hwconfig.Config)) *Sim {
	t.Helper()
	cfg := loadConfig(t)
	for _, m := range muts {
		m(cfg)
	}
	s, err := New(cfg, opts...)
	require.NoError(t, err)
	return s
}

// sampleOf is the trace sample Truth describes, as the trace would record
// it.
func sampleOf(tr Truth) TraceSample {
	ts := TraceSample{Time: tr.Time, Base: tr.Base, Velocity: tr.Velocity, Fingertip: tr.Fingertip, EStop: tr.EStop}
	for _, j := range tr.Joints {
		ts.Joints = append(ts.Joints, j.Position)
	}
	if tr.Gripper != nil {
		g := tr.Gripper.Opening
		ts.GripperOpening = &g
	}
	return ts
}

// truths supervises d of sim time like supervise and returns Truth after
// every step.
func truths(s *Sim, d time.Duration) []Truth {
	var out []Truth
	supervise(s, d, func() { out = append(out, s.Truth()) })
	return out
}

// expectedTrace applies the trace's rule to the Truth after each step
// (prev is the Truth before the first): a step is recorded when something
// moved in it, or when it is the first in which nothing did.
func expectedTrace(prev Truth, steps []Truth) []TraceSample {
	var out []TraceSample
	moving := false
	for _, tr := range steps {
		moved := tr.Velocity != (robot.Twist2D{}) || tr.Base != prev.Base ||
			!jointsEqual(tr.Joints, prev.Joints) || (tr.Gripper != nil && tr.Gripper.Opening != prev.Gripper.Opening)
		if moved || moving {
			ts := sampleOf(tr)
			ts.AtRest = !moved
			out = append(out, ts)
		}
		moving, prev = moved, tr
	}
	for i := range out {
		out[i].Seq = uint64(i + 1)
	}
	return out
}

func jointsEqual(a, b []robot.Joint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Position != b[i].Position {
			return false
		}
	}
	return true
}

func TestTraceShowsACommandedMotionSampleBySample(t *testing.T) {
	// Given an idle robot
	s := newSim(t)
	s.Step(2 * time.Second)
	// Then its trace is empty: idle steps record nothing, allocate nothing
	p := s.Trace(0)
	require.Equal(t, TracePage{Samples: []TraceSample{}, Size: DefaultTraceSize, JointNames: s.jointNames}, p)
	require.Nil(t, s.trace.chunks, "an idle robot allocated its ring")

	// When it drives to a goal and turns, supervised until well after it
	// came to rest
	before := s.Truth()
	require.NoError(t, s.Command(baseCmd("go", 1.5, -1, 90)))
	steps := truths(s, 10*time.Second)
	require.False(t, s.Truth().BaseGoal, "the base did not reach its goal")

	// Then the trace holds one sample per step that moved and one where it
	// came to rest, each the simulator's exact state after that step
	p = s.Trace(0)
	want := expectedTrace(before, steps)
	require.Equal(t, want, p.Samples)
	n := len(p.Samples)
	require.Greater(t, n, 100)
	require.Equal(t, uint64(n), p.Next)
	require.Zero(t, p.Lost)
	require.False(t, p.More)
	require.Zero(t, p.Overwritten)
	require.Equal(t, []string{"shoulder_yaw", "shoulder_pitch", "elbow", "wrist"}, p.JointNames)

	// consecutive steps, the last at rest where the robot stands now
	for i := 1; i < n; i++ {
		require.Equal(t, s.PhysicsPeriod(), p.Samples[i].Time.Sub(p.Samples[i-1].Time), "sample %d", i)
		require.False(t, p.Samples[i-1].AtRest)
	}
	last := p.Samples[n-1]
	require.True(t, last.AtRest)
	require.Equal(t, s.Truth().Base, last.Base)
	require.Equal(t, robot.Twist2D{}, last.Velocity)
	require.Equal(t, last.Base, p.Samples[n-2].Base, "the rest sample moved")
	require.Equal(t, before.Time.Add(s.PhysicsPeriod()), p.Samples[0].Time, "motion starts on the first step after the command")

	// and the path through the samples is the odometer's
	var dist, rot float64
	prev := before.Base
	for _, ts := range p.Samples {
		dist += math.Hypot(ts.Base.X-prev.X, ts.Base.Y-prev.Y)
		rot += math.Abs(robot.NormalizeAngle(ts.Base.Theta - prev.Theta))
		prev = ts.Base
	}
	odo := s.Odometer()
	require.InDelta(t, odo.BaseDistance, dist, 1e-9)
	require.InDelta(t, odo.BaseRotation, rot, 1e-9)
	require.InDelta(t, math.Hypot(1.5, 1), dist, 0.1)

	// When it idles on
	s.Step(10 * time.Second)
	// Then nothing more is recorded
	again := s.Trace(p.Next)
	require.Empty(t, again.Samples)
	require.Equal(t, p.Next, again.Next)
	require.Len(t, s.Trace(0).Samples, n)
}

func TestTraceShowsTheArmAndGripper(t *testing.T) {
	// Given a robot that moves its arm and then opens and closes its
	// gripper
	s := newSim(t)
	before := s.Truth()
	require.NoError(t, s.Command(armCmd("reach", 1, 0.5, 0.6, -1.2, 0.6)))
	steps := truths(s, 3*time.Second)
	require.NoError(t, s.Command(gripCmd("close", true, 0)))
	steps = append(steps, truths(s, 2*time.Second)...)
	require.NoError(t, s.Command(gripCmd("open", false, 0)))
	steps = append(steps, truths(s, 2*time.Second)...)

	// Then the trace shows the joints, fingertip and fingers step by step
	p := s.Trace(0)
	require.Equal(t, expectedTrace(before, steps), p.Samples)
	var rests int
	var joints, fingers float64
	prev := sampleOf(before)
	for _, ts := range p.Samples {
		require.Len(t, ts.Joints, 4)
		require.NotNil(t, ts.Fingertip)
		require.NotNil(t, ts.GripperOpening)
		for i, q := range ts.Joints {
			joints += math.Abs(q - prev.Joints[i])
		}
		fingers += math.Abs(*ts.GripperOpening - *prev.GripperOpening)
		if ts.AtRest {
			rests++
		}
		prev = ts
	}
	require.Equal(t, 3, rests, "one rest after the arm, one after closing, one after opening")
	require.InDelta(t, s.Odometer().JointTravel, joints, 1e-9)
	require.InDelta(t, s.Odometer().GripperTravel, fingers, 1e-12)
	require.InDelta(t, 2*s.Config().Gripper.MaxOpening, fingers, 1e-9)
}

func TestTraceOfABaseOnlyRobotHasNoArmOrGripper(t *testing.T) {
	s := newSim(t, func(c *hwconfig.Config) { c.Arm, c.Gripper, c.Poses, c.SafePose.Arm = nil, nil, nil, "" })
	require.NoError(t, s.Command(baseCmd("go", 1, 0, 0)))
	supervise(s, 3*time.Second, nil)
	p := s.Trace(0)
	require.NotEmpty(t, p.Samples)
	require.Nil(t, p.JointNames)
	b, err := json.Marshal(p.Samples[0])
	require.NoError(t, err)
	require.NotContains(t, string(b), "joints")
	require.NotContains(t, string(b), "fingertip")
	require.NotContains(t, string(b), "gripper_opening")
}

func TestTraceMarksTheRobotsEStop(t *testing.T) {
	// Given a base in motion
	s := newSim(t)
	require.NoError(t, s.Command(baseCmd("go", -4, 0, 0)))
	supervise(s, 4*time.Second, nil)
	moving := s.Trace(0)
	require.Greater(t, math.Abs(moving.Samples[len(moving.Samples)-1].Velocity.V), 0.1)

	// When the robot's own e-stop engages
	_, err := s.Inject(Fault{Kind: FaultRobotEStop, Duration: 2 * time.Second})
	require.NoError(t, err)
	supervise(s, time.Second, nil)

	// Then the step it engaged in is the rest sample, flagged, where the
	// base already was: nothing moved under the e-stop, and nothing more
	// is recorded while it lasts
	p := s.Trace(moving.Next)
	require.Len(t, p.Samples, 1)
	stop := p.Samples[0]
	require.True(t, stop.EStop)
	require.True(t, stop.AtRest)
	require.Equal(t, moving.Samples[len(moving.Samples)-1].Base, stop.Base)
	require.Equal(t, robot.Twist2D{}, stop.Velocity)
	for _, ts := range moving.Samples {
		require.False(t, ts.EStop)
	}

	// When it is released and the robot moves again, its samples are not
	// flagged
	supervise(s, 2*time.Second, nil)
	require.False(t, s.Truth().EStop)
	require.NoError(t, s.Command(baseCmd("again", 0, 0, 0)))
	supervise(s, time.Second, nil)
	p = s.Trace(p.Next)
	require.NotEmpty(t, p.Samples)
	for _, ts := range p.Samples {
		require.False(t, ts.EStop)
	}
}

// patrol keeps the base driving back and forth until the trace has
// recorded at least n samples, and returns the samples the trace should
// hold, by expectedTrace.
func patrol(t testing.TB, s *Sim, n uint64) []TraceSample {
	t.Helper()
	before := s.Truth()
	var steps []Truth
	for k := 0; s.Trace(math.MaxUint64).Next < n; k++ {
		require.NoError(t, s.Command(baseCmd("", float64(k%2)*2-1, 0, 0)))
		for s.Trace(math.MaxUint64).Next < n {
			s.Refresh()
			s.Step(s.PhysicsPeriod())
			steps = append(steps, s.Truth())
			if !steps[len(steps)-1].BaseGoal {
				break
			}
		}
	}
	want := expectedTrace(before, steps)
	require.Len(t, want, int(n))
	return want
}

func TestTraceWraparoundCountsLostSamplesExactly(t *testing.T) {
	// Given a ring of 100 samples and a robot whose motion recorded 250
	s := newTraceSim(t, []Option{WithTraceSize(100)})
	want := patrol(t, s, 250)
	all := s.Trace(0)
	require.Equal(t, uint64(250), all.Next)

	// When a reader asks from the start, Then it gets the 100 newest and
	// is told exactly the 150 it lost
	require.Len(t, all.Samples, 100)
	require.Equal(t, uint64(150), all.Lost)
	require.Equal(t, uint64(150), all.Overwritten)
	require.Equal(t, 100, all.Size)
	require.Equal(t, want[150:], all.Samples)

	// and a reader that is behind loses only what it had not read yet
	for _, tc := range []struct {
		since, lost uint64
		n           int
	}{
		{0, 150, 100},
		{100, 50, 100},
		{149, 1, 100},
		{150, 0, 100},
		{151, 0, 99},
		{240, 0, 10},
		{249, 0, 1},
		{250, 0, 0},
		{1000, 0, 0},
	} {
		p := s.Trace(tc.since)
		require.Equal(t, tc.lost, p.Lost, "since %d", tc.since)
		require.Len(t, p.Samples, tc.n, "since %d", tc.since)
		require.Equal(t, uint64(250), p.Next, "since %d", tc.since)
		if tc.n > 0 {
			require.Equal(t, tc.since+tc.lost+1, p.Samples[0].Seq, "since %d", tc.since)
			require.Equal(t, want[250-tc.n:], p.Samples, "since %d", tc.since)
		}
	}

	// and paging with a limit across the ring's seam reads each once
	var got []TraceSample
	var lost uint64
	for since := uint64(120); ; {
		p := s.TraceLimit(since, 7)
		require.LessOrEqual(t, len(p.Samples), 7)
		got = append(got, p.Samples...)
		lost += p.Lost
		since = p.Next
		if !p.More {
			break
		}
	}
	require.Equal(t, uint64(30), lost)
	require.Equal(t, want[150:], got)
}

func TestTraceFullRingAtTheDefaultSize(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 33,000 physics steps")
	}
	// Given a robot that moved for more steps than the default ring holds
	s := newSim(t, func(c *hwconfig.Config) { c.Camera = nil })
	const extra = 123
	want := patrol(t, s, DefaultTraceSize+extra)

	// Then the ring holds exactly the newest DefaultTraceSize, says how
	// many it lost, and takes 64 bytes a sample plus 8 a joint
	p := s.Trace(0)
	require.Len(t, p.Samples, DefaultTraceSize)
	require.Equal(t, uint64(extra), p.Lost)
	require.Equal(t, uint64(extra), p.Overwritten)
	require.Equal(t, uint64(DefaultTraceSize+extra), p.Next)
	require.Equal(t, want[extra:], p.Samples)
	require.Equal(t, 64, int(unsafe.Sizeof(traceRec{})))
	bytes := s.trace.bytes()
	require.Equal(t, DefaultTraceSize*(64+4*8), bytes, "the ring outgrew its size")
	require.Equal(t, 3<<20, bytes, "3 MiB for the 4-joint arm")
	t.Logf("full ring: %d samples, %d bytes (%.1f MiB)", DefaultTraceSize, bytes, float64(bytes)/(1<<20))
}

func TestTraceStepAllocatesNothingWhenIdle(t *testing.T) {
	// Given a robot without a camera (whose frames allocate)
	s := newSim(t, func(c *hwconfig.Config) { c.Camera = nil })
	// Then an idle step allocates nothing
	require.Zero(t, testing.AllocsPerRun(1000, func() { s.Step(s.PhysicsPeriod()) }))
	// and neither does a moving one once the ring has grown
	require.NoError(t, s.Command(baseCmd("go", -4, 0, 0)))
	supervise(s, 3*time.Second, nil)
	require.Zero(t, testing.AllocsPerRun(50, func() { s.Refresh(); s.Step(s.PhysicsPeriod()) }))
	require.Greater(t, math.Abs(s.Truth().Velocity.V), 0.1, "the base stopped; the test needs it moving")
}

func TestHTTPTracePagesWithSinceAndLimit(t *testing.T) {
	// Given a robot whose trace is empty
	s := newTraceSim(t, []Option{WithTraceSize(50)})
	h := NewHTTPHandler(s, nil)
	page := func(query string) (int, TracePage, map[string]any) {
		t.Helper()
		code, body := do(t, h, "GET", "/v1/sim/trace"+query, "")
		b, err := json.Marshal(body)
		require.NoError(t, err)
		var p TracePage
		require.NoError(t, json.Unmarshal(b, &p))
		return code, p, body
	}
	code, p, body := page("")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, TracePage{Samples: []TraceSample{}, Size: 50, JointNames: s.jointNames}, p, "an empty trace is an empty list")
	require.Equal(t, []any{}, body["samples"])

	// When the robot's motion recorded 80 samples
	want := patrol(t, s, 80)

	// Then the route answers what Trace does, in its JSON shape
	code, p, body = page("?since=0")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, s.Trace(0), p)
	require.InDelta(t, 30, body["lost"], 0)
	require.InDelta(t, 30, body["overwritten"], 0)
	require.InDelta(t, 80, body["next"], 0)
	require.InDelta(t, 50, body["size"], 0)
	require.Equal(t, false, body["more"])
	first := body["samples"].([]any)[0].(map[string]any)
	for _, k := range []string{"seq", "time", "base", "velocity", "joints", "fingertip", "gripper_opening", "estop", "at_rest"} {
		require.Contains(t, first, k)
	}
	require.InDelta(t, 31, first["seq"], 0)
	require.Len(t, first["joints"], 4)

	// and a client paging with since and limit reads every sample once
	var got []TraceSample
	var lost uint64
	for since := uint64(0); ; {
		code, p, _ := page("?since=" + strconv.FormatUint(since, 10) + "&limit=9")
		require.Equal(t, http.StatusOK, code)
		require.LessOrEqual(t, len(p.Samples), 9)
		got, lost, since = append(got, p.Samples...), lost+p.Lost, p.Next
		if !p.More {
			break
		}
	}
	require.Equal(t, uint64(30), lost)
	require.Equal(t, want[30:], got)
	_, p, _ = page("?since=80")
	require.Empty(t, p.Samples)
	require.Equal(t, uint64(80), p.Next)
	_, p, _ = page("?since=18446744073709551615&limit=1")
	require.Empty(t, p.Samples, "a since beyond the end reads nothing")
	require.Equal(t, uint64(80), p.Next)

	// And a bad since or limit is refused, naming the field
	for _, tc := range []struct{ query, field, msg string }{
		{"?since=-1", "since", "integer >= 0"},
		{"?since=x", "since", "integer >= 0"},
		{"?since=1.5", "since", "integer >= 0"},
		{"?since=18446744073709551616", "since", "integer >= 0"},
		{"?limit=0", "limit", "integer >= 1"},
		{"?limit=-3", "limit", "integer >= 1"},
		{"?since=3&limit=ten", "limit", "integer >= 1"},
	} {
		code, _, body := page(tc.query)
		require.Equal(t, http.StatusBadRequest, code, tc.query)
		e := body["error"].(map[string]any)
		require.Equal(t, tc.field, e["field"], tc.query)
		require.Contains(t, e["message"], tc.msg, tc.query)
	}
	code, _ = do(t, h, "POST", "/v1/sim/trace", "")
	require.Equal(t, http.StatusMethodNotAllowed, code)
}

// FuzzParseTraceQuery checks that the trace query parser never panics,
// that every error names since or limit, and that what it accepts
// round-trips.
func FuzzParseTraceQuery(f *testing.F) {
	for _, seed := range []string{
		"", "since=0", "since=12&limit=5", "limit=1", "since=-1", "since=x", "limit=0",
		"since=18446744073709551615", "since=18446744073709551616", "limit=99999999999999999999",
		"since=%20", "since=1&since=2", "limit=+3", "since=0x10", "since=1_000",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		since, limit, err := parseTraceQuery(q)
		if err != nil {
			qe, ok := errors.AsType[*queryError](err)
			require.True(t, ok, "%T %v", err, err)
			require.Contains(t, []string{"since", "limit"}, qe.Field)
			require.Contains(t, qe.Message, qe.Field+" ")
			return
		}
		require.GreaterOrEqual(t, limit, 0)
		if q.Get("limit") == "" {
			require.Zero(t, limit)
		} else {
			require.Positive(t, limit)
		}
		again := url.Values{"since": {strconv.FormatUint(since, 10)}, "limit": {strconv.Itoa(limit)}}
		if limit == 0 {
			again.Del("limit")
		}
		s2, l2, err := parseTraceQuery(again)
		require.NoError(t, err)
		require.Equal(t, since, s2)
		require.Equal(t, limit, l2)
	})
}
