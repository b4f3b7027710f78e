package inproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jonboulle/clockwork"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
)

// Sentinel errors callers branch on.
var (
	// ErrLinkDown means the call did not reach the robot: the driver is
	// not started or closed, or a link_down fault swallowed it.
	ErrLinkDown = errors.New("in-process link to the simulator is down")
	// ErrSuperseded means a Stop arrived while the command was waiting for
	// its (delayed) acceptance; the command was dropped and never reached
	// the robot.
	ErrSuperseded = errors.New("command superseded by a stop issued while it awaited acceptance")
	// ErrAlreadyStarted means Start was called twice.
	ErrAlreadyStarted = errors.New("in-process driver already started")
)

// Conf configures a Driver.
type Conf struct {
	// Clock (optional) drives the simulator's real-time loop and the
	// delay_ack fault. It defaults to the real clock; tests pass a
	// clockwork fake clock.
	Clock clockwork.Clock
	// Logger (optional) receives the driver's logs with component=inproc.
	// It defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the in-process transport to a simulator. Driver implements the
// supervisor's driver interface (safety.Driver).
type Driver struct {
	sim *sim.Sim
	clk clockwork.Clock
	log *slog.Logger
	hub robot.Hub

	// cmdMu orders Stop against the final, instantaneous hand-over of a
	// command to the simulator. It is never held while a command waits
	// for a delayed acceptance, so Stop never waits behind a slow Send.
	cmdMu   sync.Mutex
	stopGen uint64 // guarded by cmdMu

	mu      sync.Mutex
	running bool               // guarded by mu
	cancel  context.CancelFunc // guarded by mu
	done    chan struct{}      // guarded by mu
}

// New returns a driver for s. It does not start the simulation; call Start.
func New(s *sim.Sim, conf Conf) *Driver {
	if conf.Clock == nil {
		conf.Clock = clockwork.NewRealClock()
	}
	if conf.Logger == nil {
		conf.Logger = slog.Default()
	}
	return &Driver{sim: s, clk: conf.Clock, log: conf.Logger.With("component", "inproc")}
}

// Sim returns the simulator behind the driver (for fault injection and
// ground truth in tests and the sim console).
func (d *Driver) Sim() *sim.Sim { return d.sim }

// Start runs the simulator in real time until ctx ends or Close is called,
// publishing its state to subscribers. It returns at once.
func (d *Driver) Start(ctx context.Context) error {
	if d.sim == nil {
		return errors.New("inproc: nil simulator")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done != nil {
		return ErrAlreadyStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	d.cancel, d.done, d.running = cancel, make(chan struct{}), true
	done := d.done
	go func() {
		defer close(done)
		d.sim.Run(ctx, d.clk, d.hub.Publish)
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}()
	d.log.Info("simulator started", "physics_period", d.sim.PhysicsPeriod(), "state_period", d.sim.StatePeriod(),
		"command_timeout", d.sim.CommandTimeout())
	return nil
}

// Close stops the real-time loop, waits for it to end, and as its last act
// commands the robot to stop, so a bridge shutting down never leaves the
// simulated robot moving. It is safe to call more than once.
func (d *Driver) Close() error {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	d.stopRobot()
	d.log.Info("simulator stopped")
	return nil
}

func (d *Driver) up() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.running
}

// reach returns an error when a call cannot reach the robot now.
func (d *Driver) reach(op string) error {
	if !d.up() {
		return fmt.Errorf("inproc %s: %w (driver not running)", op, ErrLinkDown)
	}
	if d.sim.LinkDrop() {
		return fmt.Errorf("%w (the simulator's link fault is on; the %s was not delivered)", ErrLinkDown, op)
	}
	return nil
}

// Send delivers one motion goal. It waits out a delay_ack fault (on the
// driver's clock, or until ctx ends), then hands the goal to the robot's
// controller and returns its verdict: nil when accepted, a *sim.RejectError
// (errors.Is sim.ErrRejected) when refused. A Stop that arrives while Send
// waits makes Send return ErrSuperseded without delivering the goal.
func (d *Driver) Send(ctx context.Context, cmd robot.Command) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inproc send %q: %w", cmd.ID, err)
	}
	d.cmdMu.Lock()
	gen := d.stopGen
	d.cmdMu.Unlock()
	if err := d.reach("send"); err != nil {
		return err
	}
	if delay := d.sim.AckDelay(); delay > 0 {
		d.log.Debug("command acceptance delayed by fault", "id", cmd.ID, "delay", delay)
		t := d.clk.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("inproc send %q: waiting for acceptance: %w", cmd.ID, ctx.Err())
		case <-t.Chan():
		}
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	if d.stopGen != gen {
		d.log.Warn("command dropped: a stop arrived while it awaited acceptance", "id", cmd.ID, "kind", cmd.Kind.String())
		return fmt.Errorf("inproc send %q: %w", cmd.ID, ErrSuperseded)
	}
	if err := d.sim.Command(cmd); err != nil {
		d.log.Debug("command rejected by robot", "id", cmd.ID, "kind", cmd.Kind.String(), "err", err)
		return err
	}
	return nil
}

// Refresh feeds the robot's command watchdog.
func (d *Driver) Refresh(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("inproc refresh: %w", err)
	}
	if err := d.reach("refresh"); err != nil {
		return err
	}
	d.sim.Refresh()
	return nil
}

// Stop cancels every goal and brings the robot to rest. It never waits for
// a Send in flight (a delayed one is dropped instead) and works whether or
// not the real-time loop runs; it fails only when a link_down fault
// swallows it, in which case the robot's own watchdog is the backstop.
func (d *Driver) Stop(_ context.Context) error {
	d.cmdMu.Lock()
	d.stopGen++
	d.cmdMu.Unlock()
	if d.sim.LinkDrop() {
		return fmt.Errorf("%w (the simulator's link fault is on)", ErrLinkDown)
	}
	d.stopRobot()
	return nil
}

func (d *Driver) stopRobot() {
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	d.stopGen++
	d.sim.Stop()
}

// Latest returns the newest state received, false if none yet.
func (d *Driver) Latest() (robot.State, bool) { return d.hub.Latest() }

// Subscribe streams states as they arrive (latest-value semantics).
func (d *Driver) Subscribe() (<-chan robot.State, func()) { return d.hub.Subscribe() }

// LinkUp reports whether the robot is reachable: the loop runs and no
// link_down fault is active.
func (d *Driver) LinkUp() bool { return d.up() && !d.sim.LinkDownActive() }
