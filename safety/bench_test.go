package safety

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
)

// benchDriver is a driver whose robot accepts everything, never arrives,
// and timestamps each Stop the moment it is called (wall clock).
type benchDriver struct {
	hub   robot.Hub
	stops chan time.Time
	mu    sync.Mutex
	st    robot.State
	// lastSend is the wall-clock ns of the latest Send.
	lastSend atomic.Int64
}

func (d *benchDriver) Send(context.Context, robot.Command) error {
	d.lastSend.Store(time.Now().UnixNano())
	return nil
}
func (d *benchDriver) Refresh(context.Context) error { return nil }
func (d *benchDriver) Stop(context.Context) error {
	select {
	case d.stops <- time.Now():
	default:
	}
	return nil
}
func (d *benchDriver) Latest() (robot.State, bool)             { return d.hub.Latest() }
func (d *benchDriver) Subscribe() (<-chan robot.State, func()) { return d.hub.Subscribe() }
func (d *benchDriver) LinkUp() bool                            { return true }

func (d *benchDriver) publish(mut func(*robot.State)) time.Time {
	d.mu.Lock()
	if mut != nil {
		mut(&d.st)
	}
	d.st.Stamp = time.Now()
	st := d.st.Clone()
	d.mu.Unlock()
	at := time.Now()
	d.hub.Publish(st)
	return at
}

// talk publishes the robot's state every 0.5 ms, except while silent
// (optional) is set, until the returned function is called.
func (d *benchDriver) talk(silent *atomic.Bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if silent == nil || !silent.Load() {
					d.publish(nil)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// BenchmarkSafetyReaction measures the time from a fault's detection to
// the stop command leaving the supervisor for the driver, over at least
// 1,000 injected faults per kind (b.N when larger), on the real clock:
//
//   - estop: from the EStop call;
//   - limit_breach: from the robot state that reports the base outside the
//     workspace being published (includes waking the monitor);
//   - deadline and state_silence: from the monitor's detection tick (the
//     detection itself happens within one control period of the instant).
//
// It reports p50_us and p99_us. Reproduce with
// `go test ./safety -run '^$' -bench SafetyReaction -benchtime 1x`.
func BenchmarkSafetyReaction(b *testing.B) {
	for _, kind := range []TripKind{TripEStop, TripLimitBreach, TripDeadline, TripSilence} {
		b.Run(string(kind), func(b *testing.B) { benchReaction(b, kind) })
	}
}

func benchReaction(b *testing.B, kind TripKind) {
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Safety.ControlPeriod = hwconfig.Duration(time.Millisecond)
	cfg.Safety.StateTimeout = hwconfig.Duration(4 * time.Millisecond)
	cfg.SafePose.Preauthorized = false
	drv := &benchDriver{stops: make(chan time.Time, 16)}
	stowed, _ := cfg.PoseJoints("stowed")
	for i, n := range cfg.JointNames() {
		drv.st.Joints = append(drv.st.Joints, robot.Joint{Name: n, Position: stowed[i]})
	}
	drv.publish(nil)
	var evMu sync.Mutex
	var detected time.Time
	sup, err := New(Conf{
		Config: cfg, Driver: drv, Clock: clockwork.NewRealClock(), Logger: quietLogger(),
		Observer: ObserverFunc(func(e Event) {
			if e.Kind == EventMonitorTripped {
				evMu.Lock()
				detected = e.At
				evMu.Unlock()
			}
		}),
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sup.Close() }()
	ready, _ := cfg.PoseJoints("ready")
	motion := Motion{
		Auth:     Authorization{TaskID: "bench", Tool: "stop"}, // approval: never
		Steps:    []Step{ArmStep("bench", ready, 0.5, JointTolerance)},
		Deadline: time.Hour,
	}
	if kind == TripDeadline {
		motion.Deadline = 3 * time.Millisecond
	}
	// A robot that keeps talking, except while silent is set.
	var silent atomic.Bool
	defer drv.talk(&silent)()
	// reset clears every latch and puts the robot back inside its limits,
	// talking, between faults.
	reset := func() {
		silent.Store(false)
		drv.publish(func(s *robot.State) { s.Base.X = 0 })
		_ = sup.ResetEStop("bench")
		_ = sup.ClearFault("bench")
	}
	retries := 0
	retry := func(why string) {
		retries++
		if retries > 1000 {
			b.Fatalf("too many retries; last: %s (status %+v)", why, sup.Status())
		}
		reset()
	}

	n := max(b.N, 1000)
	if testing.Short() {
		n = 20
	}
	lat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		// Drain stale stops.
		for len(drv.stops) > 0 {
			<-drv.stops
		}
		done := make(chan Outcome, 1)
		go func() { done <- sup.Execute(context.Background(), motion) }()
		rejected := false
		for sup.Status().Active == nil && !rejected {
			select {
			case <-done:
				// Refused at the gate (a 4 ms state hiccup on a busy
				// machine reads as a stale link); try again.
				rejected = true
			default:
				time.Sleep(20 * time.Microsecond)
			}
		}
		if rejected {
			retry("ended before the fault was injected")
			i--
			continue
		}
		var from time.Time
		switch kind {
		case TripEStop:
			from = time.Now()
			_ = sup.EStop(context.Background(), "bench", "bench")
		case TripLimitBreach:
			from = drv.publish(func(s *robot.State) { s.Base.X = 9 })
		case TripSilence:
			silent.Store(true)
		}
		var stopAt time.Time
		select {
		case stopAt = <-drv.stops:
		case o := <-done:
			done <- o
			if len(drv.stops) > 0 {
				stopAt = <-drv.stops
				break
			}
			// Refused at the gate before our fault (see above): retry.
			if o.Kind != OutcomeRejected {
				b.Fatalf("motion ended %s without a stop", o.Kind)
			}
			<-done
			retry("refused before the fault was injected")
			i--
			continue
		}
		if kind == TripSilence || kind == TripDeadline {
			evMu.Lock()
			from = detected
			evMu.Unlock()
		}
		lat = append(lat, stopAt.Sub(from))
		// Let the robot report rest so the motion ends, then clear latches.
		silent.Store(false)
		drv.publish(func(s *robot.State) { s.Base.X = 0 })
		<-done
		reset()
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	b.ReportMetric(float64(pct(0.50).Nanoseconds())/1e3, "p50_us")
	b.ReportMetric(float64(pct(0.99).Nanoseconds())/1e3, "p99_us")
	b.ReportMetric(float64(len(lat)), "faults")
	b.ReportMetric(float64(retries), "retries")
	if testing.Verbose() {
		fmt.Printf("%s: n=%d p50=%s p99=%s max=%s\n", kind, len(lat), pct(0.5), pct(0.99), lat[len(lat)-1])
	}
}

// BenchmarkStopDuringRecovery measures, on the real clock, how fast a stop
// requested while the supervisor returns the arm to its safe pose takes
// effect (invariant 10): from the StopTask call to the stop command
// reaching the driver (stop_p50_us, stop_p99_us), and to StopTask
// returning (return_p99_us), after which the gate refuses every command
// of the task — checked on every iteration (no Send after StopTask
// returned, and the task ends cancelled), the benchmark fails otherwise. Reproduce with
// `go test ./safety -run '^$' -bench StopDuringRecovery -benchtime 1x`.
func BenchmarkStopDuringRecovery(b *testing.B) {
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Safety.ControlPeriod = hwconfig.Duration(time.Millisecond)
	cfg.Safety.StateTimeout = hwconfig.Duration(20 * time.Millisecond)
	cfg.SafePose.Preauthorized = true
	cfg.SafePose.Timeout = hwconfig.Duration(time.Hour)
	drv := &benchDriver{stops: make(chan time.Time, 64)}
	ready, _ := cfg.PoseJoints("ready")
	reach, _ := cfg.PoseJoints("reach_table")
	for i, n := range cfg.JointNames() {
		drv.st.Joints = append(drv.st.Joints, robot.Joint{Name: n, Position: ready[i]})
	}
	drv.publish(nil)
	sup, err := New(Conf{Config: cfg, Driver: drv, Clock: clockwork.NewRealClock(), Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sup.Close() }()
	defer drv.talk(nil)()

	n := max(b.N, 1000)
	if testing.Short() {
		n = 20
	}
	stopLat := make([]time.Duration, 0, n)
	retLat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		task := fmt.Sprintf("bench-%d", i)
		// The arm never reaches its goal: the motion times out, stops, and
		// the supervisor starts returning the arm to the safe pose.
		m := Motion{
			Auth:     Authorization{TaskID: task, Tool: "stop"}, // approval: never
			Steps:    []Step{ArmStep("reach", reach, 0.5, JointTolerance)},
			Deadline: 2 * time.Millisecond,
		}
		done := make(chan Outcome, 1)
		go func() { done <- sup.Execute(context.Background(), m) }()
		for {
			st := sup.Status()
			if st.Active != nil && st.Active.Phase == PhaseRecovering {
				break
			}
			select {
			case o := <-done:
				b.Fatalf("motion ended %s before recovery: %v", o.Kind, o.Err)
			default:
				time.Sleep(20 * time.Microsecond)
			}
		}
		for len(drv.stops) > 0 {
			<-drv.stops
		}
		from := time.Now()
		if err := sup.StopTask(context.Background(), task, "bench", "stop during recovery"); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		stopAt := <-drv.stops
		stopLat = append(stopLat, stopAt.Sub(from))
		retLat = append(retLat, returned.Sub(from))
		if o := <-done; o.Kind != OutcomeCancelled {
			b.Fatalf("a stop during recovery ended %s (%s), not cancelled", o.Kind, o.FaultReason)
		}
		if last := time.Unix(0, drv.lastSend.Load()); !last.Before(returned) {
			b.Fatalf("a command of the task left the gate %s after StopTask returned", last.Sub(returned))
		}
	}
	b.StopTimer()
	pct := func(lat []time.Duration, p float64) float64 {
		slices.Sort(lat)
		return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(stopLat, 0.50), "stop_p50_us")
	b.ReportMetric(pct(stopLat, 0.99), "stop_p99_us")
	b.ReportMetric(pct(retLat, 0.99), "return_p99_us")
}
