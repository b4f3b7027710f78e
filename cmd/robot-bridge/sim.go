package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
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
// each with its own simulator (seed + i), watchdog and faults — with a
// fleet hw-config, the fleet's robots (its ids, seeds and overrides; all
// of them unless --robots takes the first N) — each on a
// connection of its own (its own last will) unless --share-connection
// puts them all on one (simnode.Link: practical for a thousand robots, at
// the price of per-robot last wills). The HTTP API serves every robot
// under /v1/sim/robots/{id}/ (GET /v1/sim/robots lists them), and the
// first one under /v1/sim/ as well.
func simCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("sim", stderr)
	configPath := fs.String("config", defaultConfig, "the robot's hw-config `FILE` (its sim section describes the world)")
	transport := fs.String("transport", "none", "`KIND` of link a bridge reaches the simulated robot over: none (only the HTTP API), ros (also a ROS1 node on the config's master) or mqtt (also an MQTT robot on the broker)")
	broker := fs.String("broker", "", "MQTT broker `URL` for --transport mqtt (default: transport.mqtt.broker, else the bridge's embedded broker at transport.mqtt.listen)")
	robots := fs.Int("robots", 1, "`N` simulated robots for --transport mqtt, with ids <robot.id>-1 … <robot.id>-N when N > 1 (default with a fleet hw-config: every robot of the fleet, with its ids)")
	share := fs.Bool("share-connection", false, "for --transport mqtt: every simulated robot on one MQTT connection rather than one each (a robot then has no last will of its own: a killed sim process shows as silence)")
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
	robotsSet := false
	fs.Visit(func(f *flag.Flag) { robotsSet = robotsSet || f.Name == "robots" })
	if robotsSet && (*robots < 1 || *robots > 1000 || (*robots > 1 && *transport != "mqtt")) {
		sayf(stderr, "robot-bridge sim: --robots %d: allowed: 1 to 1000, more than 1 only with --transport mqtt\n", *robots)
		return 2
	}
	if *broker != "" && *transport != "mqtt" {
		sayln(stderr, "robot-bridge sim: --broker is for --transport mqtt")
		return 2
	}
	if *share && *transport != "mqtt" {
		sayln(stderr, "robot-bridge sim: --share-connection is for --transport mqtt")
		return 2
	}
	cfg, err := hwconfig.Load(*configPath)
	if err != nil {
		sayln(stderr, err)
		return 2
	}
	clk := clockwork.NewRealClock()
	n := *robots
	if !robotsSet {
		n = 0
	}
	robotCfgs, err := simRobots(cfg, n, *transport == "mqtt")
	if err != nil {
		sayln(stderr, "robot-bridge sim:", err)
		return 2
	}
	sims := make([]*sim.Sim, len(robotCfgs))
	for i, c := range robotCfgs {
		if sims[i], err = sim.New(c, sim.WithEpoch(clk.Now()), sim.WithTraceSize(traceSize(len(robotCfgs)))); err != nil {
			sayf(stderr, "robot-bridge sim: robot %s: %v\n", c.Robot.ID, err)
			return 2
		}
	}
	s := sims[0]
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		sayln(stderr, "robot-bridge sim:", err)
		return 1
	}
	srv := &http.Server{Handler: newSimRoutes(robotCfgs, sims, logger), ReadHeaderTimeout: 5 * time.Second}
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
		fleet, err := startMQTTRobots(ctx, robotCfgs, sims, *broker, *share, clk, logger)
		if err != nil {
			sayln(stderr, "robot-bridge sim:", err)
			_ = srv.Close()
			return 1
		}
		for _, n := range fleet.nodes {
			sayf(stdout, "robot-bridge sim %s: MQTT robot on %s/%s/\n", cfg.Robot.ID, n.Topics().Prefix, n.Topics().ID)
		}
		if len(robotCfgs) > 1 {
			sayf(stdout, "robot-bridge sim %s: %d robots; each one's fault injection and truth at http://%s/v1/sim/robots/{id}/\n", cfg.Robot.ID, len(robotCfgs), ln.Addr())
		}
		<-ctx.Done()
		fleet.close()
	default:
		s.Run(ctx, clk, func(robot.State) {})
	}
	shutdownCtx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer c2()
	_ = srv.Shutdown(shutdownCtx)
	for _, rs := range sims {
		rs.Stop()
	}
	return 0
}

// simRobots is the hw-config of each simulated robot, the one place that
// says which robots a sim process runs. With a fleet hw-config they are
// its robots (cfg.Robots: their ids, seeds and overrides), all of them
// when n is 0 and the link is MQTT, else the first n (the first alone
// over another link). Without one they are n copies of cfg (one when n is
// 0), the first cfg itself, each other seeded seed + i, with ids
// <robot.id>-1 … <robot.id>-n when n > 1.
// traceSize is each robot's motion trace (GET …/trace) in a process of n
// simulated robots: the default for up to 16 robots, then shares of 16
// default traces (48 MiB for the bundled arm, every robot moving), but
// never under 1,024 samples (10 s of motion at 100 Hz).
func traceSize(n int) int {
	if n <= 16 {
		return sim.DefaultTraceSize
	}
	return max(1024, sim.DefaultTraceSize*16/n)
}

func simRobots(cfg *hwconfig.Config, n int, mqtt bool) ([]*hwconfig.Config, error) {
	if cfg.Fleet != nil {
		all, err := cfg.Robots()
		if err != nil {
			return nil, err
		}
		switch {
		case n == 0 && mqtt:
			return all, nil
		case n == 0:
			return all[:1], nil
		case n > len(all):
			return nil, fmt.Errorf("--robots %d: the hw-config's fleet has %d robots", n, len(all))
		}
		return all[:n], nil
	}
	n = max(n, 1)
	out := make([]*hwconfig.Config, n)
	for i := range n {
		c := cfg.Clone()
		if n > 1 {
			c.Robot.ID = fmt.Sprintf("%s-%d", cfg.Robot.ID, i+1)
		}
		if c.Sim != nil {
			c.Sim.Seed += int64(i)
		}
		out[i] = c
	}
	return out, nil
}

// mqttRobots are the simulated MQTT robots of a sim process and the
// connection they share, if they do.
type mqttRobots struct {
	nodes []*mqttsim.Node
	link  *mqttsim.Link // nil: a connection each
}

// close stops every robot (each says offline), then the shared link.
func (m *mqttRobots) close() {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, n := range m.nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_ = n.Close()
		})
	}
	wg.Wait()
	if m.link != nil {
		_ = m.link.Close()
	}
}

// startMQTTRobots starts one simulated MQTT robot per config on its
// simulator, each on a connection of its own, or all on one link when
// share is set.
func startMQTTRobots(ctx context.Context, cfgs []*hwconfig.Config, sims []*sim.Sim, broker string, share bool, clk clockwork.Clock, logger *slog.Logger) (*mqttRobots, error) {
	m := &mqttRobots{}
	if share {
		l, err := mqttsim.NewLink(mqttsim.LinkConf{Config: cfgs[0], Broker: broker, Env: os.Getenv, Logger: logger})
		if err == nil {
			err = l.Start(ctx)
		}
		if err != nil {
			return nil, err
		}
		m.link = l
	}
	for i, c := range cfgs {
		node, err := mqttsim.New(mqttsim.Conf{Config: c, Sim: sims[i], Broker: broker, Env: os.Getenv, Clock: clk, Logger: logger, Link: m.link})
		if err == nil {
			err = node.Start(ctx)
		}
		if err != nil {
			m.close()
			return nil, fmt.Errorf("robot %s: %w", c.Robot.ID, err)
		}
		m.nodes = append(m.nodes, node)
	}
	return m, nil
}

// simRoutes is the sim process's HTTP API over all its robots: each
// robot's fault injection and truth (sim.NewHTTPHandler) under
// /v1/sim/robots/{id}/, the list of robots at GET /v1/sim/robots, and the
// first robot's under /v1/sim/ too, as with a single robot.
type simRoutes struct {
	first http.Handler
	byID  map[string]http.Handler
	list  []simRobot
}

// simRobot is one robot in GET /v1/sim/robots.
type simRobot struct {
	ID   string `json:"id"`
	Seed int64  `json:"seed"`
	Path string `json:"path"`
}

func newSimRoutes(cfgs []*hwconfig.Config, sims []*sim.Sim, logger *slog.Logger) *simRoutes {
	h := &simRoutes{byID: make(map[string]http.Handler, len(cfgs))}
	for i, c := range cfgs {
		rh := sim.NewHTTPHandler(sims[i], logger.With("robot", c.Robot.ID))
		if i == 0 {
			h.first = rh
		}
		h.byID[c.Robot.ID] = rh
		var seed int64
		if c.Sim != nil {
			seed = c.Sim.Seed
		}
		h.list = append(h.list, simRobot{ID: c.Robot.ID, Seed: seed, Path: "/v1/sim/robots/" + c.Robot.ID + "/"})
	}
	return h
}

func (h *simRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/sim/robots" || r.URL.Path == "/v1/sim/robots/" {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			simError(w, http.StatusMethodNotAllowed, "GET only")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"robots": h.list})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/sim/robots/")
	if !ok {
		h.first.ServeHTTP(w, r)
		return
	}
	id, tail, _ := strings.Cut(rest, "/")
	rh := h.byID[id]
	if rh == nil {
		simError(w, http.StatusNotFound, fmt.Sprintf("no simulated robot %q here (GET /v1/sim/robots lists them)", truncateID(id)))
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path, r2.URL.RawPath = "/v1/sim/"+tail, ""
	rh.ServeHTTP(w, r2)
}

// simError writes an error in the sim API's shape.
func simError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
}

// truncateID bounds an id from a request path before it is echoed.
func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}
