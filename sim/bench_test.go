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
