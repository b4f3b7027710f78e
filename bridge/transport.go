package bridge

import (
	"context"
	"fmt"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
	"github.com/robot-bridge/robot-bridge/transport/ros"
)

// newDrivers builds every robot's link, as the config's transport says,
// and registers each one's release right after building it. Only the
// robot's supervisor receives its driver.
func (b *Bridge) newDrivers() error {
	cfg := b.conf.Config
	switch cfg.Transport.Kind {
	case hwconfig.TransportSim:
		for _, s := range b.robots {
			sm, err := sim.New(s.cfg, sim.WithEpoch(b.clock.Now()))
			if err != nil {
				return fmt.Errorf("bridge: simulator of %s: %w", s.id, err)
			}
			s.sim = sm
			b.setDriver(s, inproc.New(sm, inproc.Conf{Clock: b.clock, Logger: robotLogger(b.conf.Logger, s, b.fleet())}))
		}
		return nil
	case hwconfig.TransportROS:
		// The master comes from transport.ros.master_uri or, as for every
		// ROS tool, ROS_MASTER_URI. A ROS config is one robot (a fleet
		// over ROS is refused when the config is loaded).
		s := b.first()
		d, err := ros.New(ros.Conf{Config: s.cfg, Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger})
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		b.setDriver(s, d)
		return nil
	case hwconfig.TransportMQTT:
		return b.newMQTTDrivers()
	}
	return fmt.Errorf("bridge: transport.kind %q is not supported by this build (allowed: sim, ros, mqtt)", cfg.Transport.Kind)
}

// setDriver gives robot s its link and registers the link's release.
func (b *Bridge) setDriver(s *robotStack, d driver) {
	s.drv = d
	b.td.add("robot link "+s.id, func(context.Context) error { return d.Close() })
}

// newMQTTDrivers builds the robots' MQTT links: to the configured broker,
// or to an embedded broker the bridge runs on loopback when the config
// names none (acquired first, so released after every link).
func (b *Bridge) newMQTTDrivers() error {
	m := b.conf.Config.Clone()
	m.ApplyDefaults()
	broker := m.Transport.MQTT.Broker
	if broker == "" {
		br, err := mqtt.StartBroker(m.Transport.MQTT.Listen, b.conf.Logger)
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		b.embedded = br
		b.td.add("embedded MQTT broker", func(context.Context) error { return br.Close() })
		broker = br.URL()
	}
	if !b.fleet() && b.cluster == nil {
		s := b.first()
		d, err := mqtt.New(mqtt.Conf{Config: s.cfg, Broker: broker, Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger, Registerer: b.reg})
		if err != nil {
			return fmt.Errorf("bridge: %w", err)
		}
		b.setDriver(s, d)
		return nil
	}
	// A fleet's robots share one client (one connection, wildcard
	// subscriptions routed by robot id); each robot's driver keeps its
	// own link, acks and stops, and closing one leaves the others on.
	cfgs := make([]*hwconfig.Config, len(b.robots))
	for i, s := range b.robots {
		cfgs[i] = s.cfg
	}
	fc := mqtt.FleetConf{Configs: cfgs, Broker: broker, Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger, Registerer: b.reg}
	if b.cluster != nil {
		// Every command carries the robot's lease epoch and this bridge's
		// id; the connection's last will is this bridge's own.
		fc.BridgeID = b.cluster.conf.BridgeID
	}
	f, err := mqtt.NewFleet(fc)
	if err != nil {
		return fmt.Errorf("bridge: %w", err)
	}
	// Released after every robot's link: each driver's close stops its
	// robot over the connection the fleet's close then ends.
	b.td.add("MQTT connection", func(context.Context) error { return f.Close() })
	for _, s := range b.robots {
		d := f.Driver(s.id)
		if s.lease != nil {
			d.SetFence(s.lease)
		}
		b.setDriver(s, d)
	}
	return nil
}

// BrokerAddr is the embedded MQTT broker's host:port, "" when the bridge
// runs none.
func (b *Bridge) BrokerAddr() string {
	if b.embedded == nil {
		return ""
	}
	return b.embedded.Addr()
}
