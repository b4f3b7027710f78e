package bridge

import (
	"errors"
	"fmt"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
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
	case hwconfig.TransportMQTT:
		m := cfg.Clone()
		m.ApplyDefaults()
		if m.Transport.MQTT.Broker != "" {
			d, err := mqtt.New(mqtt.Conf{Config: cfg, Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger, Registerer: b.reg})
			if err != nil {
				return nil, fmt.Errorf("bridge: %w", err)
			}
			return d, nil
		}
		// No broker URL: the bridge runs an embedded broker on loopback
		// for the robot to connect to, acquired here with the link and
		// released after it.
		br, err := mqtt.StartBroker(m.Transport.MQTT.Listen, b.conf.Logger)
		if err != nil {
			return nil, fmt.Errorf("bridge: %w", err)
		}
		d, err := mqtt.New(mqtt.Conf{Config: cfg, Broker: br.URL(), Env: b.conf.Env, Clock: b.clock, Logger: b.conf.Logger, Registerer: b.reg})
		if err != nil {
			_ = br.Close()
			return nil, fmt.Errorf("bridge: %w", err)
		}
		return &embeddedMQTT{Driver: d, broker: br, addr: br.Addr()}, nil
	}
	return nil, fmt.Errorf("bridge: transport.kind %q is not supported by this build (allowed: sim, ros, mqtt)", cfg.Transport.Kind)
}

// embeddedMQTT is the MQTT driver behind the bridge's own broker. Close
// closes the driver — whose last act is the robot's stop — and only then
// the broker, so the stop leaves before the robot's connection goes.
type embeddedMQTT struct {
	*mqtt.Driver
	broker *mqtt.Broker
	addr   string
}

// Close stops the robot and disconnects, then stops the broker. It is
// safe to call more than once.
func (e *embeddedMQTT) Close() error {
	err := e.Driver.Close()
	if e.broker != nil {
		err = errors.Join(err, e.broker.Close())
		e.broker = nil
	}
	return err
}

// BrokerAddr is the embedded broker's host:port.
func (e *embeddedMQTT) BrokerAddr() string { return e.addr }
