package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jonboulle/clockwork"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/sim"
	mqttsim "github.com/robot-bridge/robot-bridge/transport/mqtt/simnode"
	"github.com/robot-bridge/robot-bridge/transport/ros/simnode"
)

// simCmd runs the bundled simulator as its own process: in real time, with
// its command watchdog, and its fault-injection and ground-truth HTTP API
// under /v1/sim/. With --transport none it serves only that API; with
// --transport ros it is also a ROS1 node on the config's master
// (transport.ros.master_uri or ROS_MASTER_URI) serving exactly the
// interfaces the config names, its command watchdog fed by the bridge's
// heartbeat, so a bridge that dies mid-motion leaves a robot that stops.
// With --transport mqtt it is an MQTT robot (transport/mqtt/simnode) on
// --broker, else the config's broker, else the bridge's embedded broker
// at transport.mqtt.listen; --robots N runs N of them, ids <id>-1 … <id>-N,
// each with its own simulator (seed + i), watchdog and faults; the HTTP
// API serves the first.
func simCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE` (its sim section describes the world)")
	transport := fs.String("transport", "none", "`KIND` of link a bridge reaches the simulated robot over: none (only the HTTP API), ros (also a ROS1 node on the config's master) or mqtt (also an MQTT robot on the broker)")
	broker := fs.String("broker", "", "MQTT broker `URL` for --transport mqtt (default: transport.mqtt.broker, else the bridge's embedded broker at transport.mqtt.listen)")
	robots := fs.Int("robots", 1, "`N` simulated robots for --transport mqtt, with ids <robot.id>-1 … <robot.id>-N when N > 1")
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
	if *transport != "none" && *transport != "ros" && *transport != "mqtt" {
		sayf(stderr, "robot-bridge sim: --transport %q: allowed: none, ros, mqtt\n", *transport)
		return 2
	}
	if *robots < 1 || *robots > 1000 || (*robots > 1 && *transport != "mqtt") {
		sayf(stderr, "robot-bridge sim: --robots %d: allowed: 1 to 1000, more than 1 only with --transport mqtt\n", *robots)
		return 2
	}
	if *broker != "" && *transport != "mqtt" {
		sayln(stderr, "robot-bridge sim: --broker is for --transport mqtt")
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
	switch *transport {
	case "ros":
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
	case "mqtt":
		if cfg.Transport.MQTT == nil {
			sayln(stderr, "robot-bridge sim: --transport mqtt needs a transport.mqtt section in the hw-config")
			_ = srv.Close()
			return 2
		}
		nodes, err := startMQTTRobots(ctx, cfg, s, *broker, *robots, clk, logger)
		if err != nil {
			sayln(stderr, "robot-bridge sim:", err)
			_ = srv.Close()
			return 1
		}
		for _, n := range nodes {
			sayf(stdout, "robot-bridge sim %s: MQTT robot on %s/%s/\n", cfg.Robot.ID, n.Topics().Prefix, n.Topics().ID)
		}
		<-ctx.Done()
		for _, n := range nodes {
			_ = n.Close()
		}
	default:
		s.Run(ctx, clk, func(robot.State) {})
	}
	shutdownCtx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer c2()
	_ = srv.Shutdown(shutdownCtx)
	s.Stop()
	return 0
}

// startMQTTRobots starts n simulated MQTT robots: the first on s (the one
// the HTTP API serves), each other on a simulator of its own seeded
// seed + i. With n > 1 the ids are <robot.id>-1 … <robot.id>-n.
func startMQTTRobots(ctx context.Context, cfg *hwconfig.Config, s *sim.Sim, broker string, n int, clk clockwork.Clock, logger *slog.Logger) ([]*mqttsim.Node, error) {
	var nodes []*mqttsim.Node
	for i := range n {
		c := cfg.Clone()
		id := cfg.Robot.ID
		if n > 1 {
			id = fmt.Sprintf("%s-%d", cfg.Robot.ID, i+1)
		}
		var rs *sim.Sim
		if i == 0 {
			rs = s
		} else {
			c.Sim.Seed += int64(i)
			var err error
			if rs, err = sim.New(c, sim.WithEpoch(clk.Now())); err != nil {
				return nodes, err
			}
		}
		node, err := mqttsim.New(mqttsim.Conf{Config: c, Sim: rs, Broker: broker, RobotID: id, Env: os.Getenv, Clock: clk, Logger: logger})
		if err == nil {
			err = node.Start(ctx)
		}
		if err != nil {
			for _, o := range nodes {
				_ = o.Close()
			}
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}
