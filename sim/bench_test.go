package sim

import (
	"testing"
	"time"
)

// benchStep steps n robots, each driving to a goal with its camera on, one
// 100 Hz physics period per robot per iteration, and reports robot-steps per
// second and ns per robot-step.
func benchStep(b *testing.B, n int) {
	cfg := loadConfig(b)
	cfg.Sim.PhysicsHz = 100
	robots := make([]*Sim, n)
	for i := range robots {
		c := *cfg
		sc := *cfg.Sim
		sc.Seed = int64(i)
		c.Sim = &sc
		s, err := New(&c)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Command(baseCmd("go", -4, float64(i%8)-4, 90)); err != nil {
			b.Fatal(err)
		}
		robots[i] = s
	}
	dt := 10 * time.Millisecond
	b.ResetTimer()
	start := time.Now()
	i := 0
	for b.Loop() {
		i++
		for k, s := range robots {
			if i%100 == 0 && s.idle() {
				// Keep every robot patrolling so the workload is steady.
				if err := s.Command(baseCmd("", float64((i/100)%2)*6-3, float64(k%4)-4, 0)); err != nil {
					b.Fatal(err)
				}
			}
			s.Refresh()
			s.Step(dt)
		}
	}
	elapsed := time.Since(start)
	robotSteps := float64(b.N) * float64(n)
	b.ReportMetric(robotSteps/elapsed.Seconds(), "robot-steps/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/robotSteps, "ns/robot-step")
	// Real-time headroom: how many times faster than 100 Hz all n robots run.
	b.ReportMetric(robotSteps/float64(n)/elapsed.Seconds()/100, "x-realtime")
}

func BenchmarkStep1Robot(b *testing.B)     { benchStep(b, 1) }
func BenchmarkStep1000Robots(b *testing.B) { benchStep(b, 1000) }

func (s *Sim) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.battery = 100 // a benchmark runs for hours of sim time
	return s.goal == nil
}

// BenchmarkStepTrace is one physics step of one robot with the motion
// trace on (it always is), camera off so that the step's own cost shows:
// idle (nothing moves, nothing recorded) and moving (the base patrolling,
// one sample a step, the ring full after 32,768 steps and overwritten from
// then on). It reports the trace ring's bytes at the end.
func BenchmarkStepTrace(b *testing.B) {
	for _, moving := range []bool{false, true} {
		name := "idle"
		if moving {
			name = "moving"
		}
		b.Run(name, func(b *testing.B) {
			cfg := loadConfig(b)
			cfg.Camera = nil
			s, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			dt := s.PhysicsPeriod()
			k := 0
			b.ReportAllocs()
			for b.Loop() {
				if moving && s.idle() {
					k++
					if err := s.Command(baseCmd("", float64(k%2)*6-3, 0, 0)); err != nil {
						b.Fatal(err)
					}
				}
				s.Refresh()
				s.Step(dt)
			}
			b.StopTimer()
			p := s.Trace(^uint64(0))
			if moving != (p.Next > 0) {
				b.Fatalf("moving=%v but the trace recorded %d samples", moving, p.Next)
			}
			b.ReportMetric(float64(p.Next)/float64(b.N), "samples/op")
			b.ReportMetric(float64(s.trace.bytes()), "ring-bytes")
		})
	}
}
