package inproc_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
)

// Example shows how the bridge wires the zero-setup default: the simulator
// starts at the bridge clock's time so that state stamps compare with it,
// and the driver runs it in real time until Close, which stops the robot.
func Example() {
	cfg, err := hwconfig.Load("hw-configs/sim-mobile-manipulator.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	clk := clockwork.NewRealClock()
	s, err := sim.New(cfg, sim.WithEpoch(clk.Now()))
	if err != nil {
		fmt.Println(err)
		return
	}
	drv := inproc.New(s, inproc.Conf{Clock: clk, Logger: slog.Default()})
	if err := drv.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		if err := drv.Close(); err != nil {
			fmt.Println(err)
		}
	}()
	// Hand drv to the supervisor as its safety.Driver, and mount
	// sim.NewHTTPHandler(s, logger) for fault injection.
}
