package bridge

import (
	"fmt"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
	"github.com/robot-bridge/robot-bridge/transport/ros"
)

// newDriver builds the transport the config names. Only the supervisor
// receives the driver it returns.
func (b *Bridge) newDriver(cfg *hwconfig.Config) (driver, error) {
	switch cfg.Transport.Kind {
	case hwconfig.TransportSim:
		s, err := sim.New(cfg, sim.WithEpoch(b.clock.Now()))
		if err != nil {
			return nil, fmt.Errorf("bridge: simulator: %w", err)
		}
		b.sim = s
		return inproc.New(s, inproc.Conf{Clock: b.clock, Logger: b.conf.Logger}), nil
	case hwconfig.TransportROS:
		// The master comes from transport.ros.master_uri or, as for every
		// ROS tool, ROS_MASTER_URI.
		d, err := ros.New(ros.Conf{Config: cfg, Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger})
		if err != nil {
			return nil, fmt.Errorf("bridge: %w", err)
		}
		return d, nil
	}
	return nil, fmt.Errorf("bridge: transport.kind %q is not supported by this build yet (allowed: sim, ros)", cfg.Transport.Kind)
}
