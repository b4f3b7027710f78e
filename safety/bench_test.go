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
}

func (d *benchDriver) Send(context.Context, robot.Command) error { return nil }
func (d *benchDriver) Refresh(context.Context) error             { return nil }
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
	stopPub := make(chan struct{})
	var pubWG sync.WaitGroup
	pubWG.Add(1)
	go func() {
		defer pubWG.Done()
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-stopPub:
				return
			case <-t.C:
				if !silent.Load() {
					drv.publish(nil)
				}
			}
		}
	}()
	defer func() { close(stopPub); pubWG.Wait() }()
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
