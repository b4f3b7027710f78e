package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// simCmd runs the bundled simulator as its own process: in real time, with
// its command watchdog, and its fault-injection and ground-truth HTTP API
// under /v1/sim/. With --transport none it serves only that API; with
// --transport ros it is also a ROS1 node on the config's master
// (transport.ros.master_uri or ROS_MASTER_URI) serving exactly the
// interfaces the config names, its command watchdog fed by the bridge's
// heartbeat, so a bridge that dies mid-motion leaves a robot that stops.
func simCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE` (its sim section describes the world)")
	transport := fs.String("transport", "none", "`KIND` of link a bridge reaches the simulated robot over: none (only the HTTP API) or ros (also a ROS1 node on the config's master)")
	listen := fs.String("listen", "127.0.0.1:8090", "`HOST:PORT` of the simulator's fault-injection and truth API")
	logLevel := fs.String("log-level", "info", "`LEVEL` of the JSON log on stderr: debug, info, warn or error")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge sim: unexpected argument %q (sim takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		sayln(stderr, "robot-bridge sim:", err)
		return 2
	}
	if *transport != "none" && *transport != "ros" {
		sayf(stderr, "robot-bridge sim: --transport %q: allowed: none, ros\n", *transport)
		return 2
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, err)
		return 2
	}
	clk := clockwork.NewRealClock()
	s, err := sim.New(cfg, sim.WithEpoch(clk.Now()))
	if err != nil {
		sayln(stderr, "robot-bridge sim:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		sayln(stderr, "robot-bridge sim:", err)
		return 1
	}
	srv := &http.Server{Handler: sim.NewHTTPHandler(s, logger), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("sim http server stopped", "err", err)
		}
	}()
	ctx, cancel := signalContext()
	defer cancel()
	sayf(stdout, "robot-bridge sim %s: fault injection and truth at http://%s/v1/sim/\n", cfg.Robot.ID, ln.Addr())
	if *transport == "ros" {
		if cfg.Transport.ROS == nil {
			sayln(stderr, "robot-bridge sim: --transport ros needs a transport.ros section in the hw-config")
			_ = srv.Close()
			return 2
		}
		node, err := simnode.New(simnode.Conf{Config: cfg, Sim: s, Env: os.Getenv, Clock: clk, Logger: logger})
		if err == nil {
			err = node.Start(ctx)
		}
		if err != nil {
			sayln(stderr, "robot-bridge sim:", err)
			_ = srv.Close()
			return 1
		}
		sayf(stdout, "robot-bridge sim %s: ROS node robot_sim serving the config's topics and actions\n", cfg.Robot.ID)
		<-ctx.Done()
		_ = node.Close()
	} else {
		s.Run(ctx, clk, func(robot.State) {})
	}
	shutdownCtx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer c2()
	_ = srv.Shutdown(shutdownCtx)
	s.Stop()
	return 0
}
