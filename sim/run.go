package sim

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/robot"
)

// Run drives the simulator in real time on clk: it steps the physics every
// physics period and publishes the measured state every state period
// (once at start, too), until ctx ends. Publications go through the
// drop_state and link_down faults, so a transport fed by Run sees exactly
// the silence a real flaky link produces. publish is called without any
// lock held and may block; physics waits for it, as a real control loop
// would fall behind.
//
// Each tick advances sim time by the tick's own elapsed time (bounded to ten
// periods), so missed ticks on a busy machine do not make sim time drift
// behind the wall clock, and a fake clock advanced one period at a time
// gives exactly one physics step per advance.
func (s *Sim) Run(ctx context.Context, clk clockwork.Clock, publish func(robot.State)) {
	period := s.physicsPeriod
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	last := clk.Now()
	if s.publishable() {
		publish(s.State())
	}
	var sincePublish time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.Chan():
			dt := now.Sub(last)
			last = now
			if dt <= 0 {
				continue
			}
			dt = min(dt, 10*period)
			s.Step(dt)
			sincePublish += dt
			if sincePublish < s.statePeriod {
				continue
			}
			sincePublish %= s.statePeriod
			if s.publishable() {
				publish(s.State())
			}
		}
	}
}
