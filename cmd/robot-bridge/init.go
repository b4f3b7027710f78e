package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"

	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/transport/ros"
)

// initAbout is init's --help text after its summary.
const initAbout = "With --transport ros (the default) it reads the running robot's ROS graph from\n" +
	"its master (--ros-master, else ROS_MASTER_URI): topics, their types and the\n" +
	"action servers (by the actionlib <name>/goal|cancel|status|feedback|result\n" +
	"pattern), matches them to the standard interfaces the bridge speaks\n" +
	"(nav_msgs/Odometry, geometry_msgs/Twist, a move_base_msgs/MoveBase action,\n" +
	"sensor_msgs/BatteryState, a std_msgs/Bool e-stop), reads the robot's pose\n" +
	"from its odometry and writes a commented starter hw-config: transport names\n" +
	"filled in, limits at conservative values marked REVIEW, the workspace a\n" +
	"square around the robot, approval required for every motion. The config\n" +
	"passes check-config; what init could not determine is printed (to stderr\n" +
	"when the config goes to stdout). With --transport sim it writes the bundled\n" +
	"simulator's config. It never commands the robot."

// initCmd is "init": a starter hw-config from a live robot.
func initCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("init", stderr)
	master := fs.String("ros-master", "", "`URL` of the running robot's ROS master, e.g. http://robot:11311 (default: ROS_MASTER_URI)")
	kind := fs.String("transport", "ros", "`KIND` of robot: ros (read from a running ROS master) or sim (the bundled simulator's config)")
	out := fs.String("out", "", "write the config to `FILE` instead of stdout (an existing FILE is kept unless --force)")
	force := fs.Bool("force", false, "overwrite --out FILE when it exists")
	id := fs.String("id", "", "the robot's `ID` in the config, robot.id (default: the master's host name, else ros-robot)")
	timeout := fs.Duration("timeout", 5*time.Second, "`DURATION` to wait for the master and the robot's odometry")
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 0 {
		sayf(stderr, "robot-bridge init: unexpected argument %q (init takes only flags)\n\n", fs.Arg(0))
		commandUsage(fs, stderr)
		return 2
	}
	if *out != "" && !*force {
		if _, err := os.Stat(*out); err == nil {
			sayf(stderr, "robot-bridge init: %s exists; pass --force to overwrite it, or another --out\n", *out)
			return 2
		}
	}
	var (
		cfg   []byte
		notes []string
	)
	switch *kind {
	case string(hwconfig.TransportSim):
		if *master != "" {
			sayln(stderr, "robot-bridge init: --ros-master is for --transport ros")
			return 2
		}
		cfg = hwconfig.SimStarter()
		notes = []string{"this is the bundled simulator's config (hw-configs/sim-mobile-manipulator.yaml); run it with: robot-bridge serve --config FILE"}
	case string(hwconfig.TransportROS):
		uri := *master
		if uri == "" {
			uri = os.Getenv("ROS_MASTER_URI")
		}
		if uri == "" {
			sayln(stderr, "robot-bridge init: which robot? pass --ros-master http://ROBOT:11311 (or set ROS_MASTER_URI)")
			return 2
		}
		if *timeout <= 0 {
			sayln(stderr, "robot-bridge init: --timeout must be positive, like 5s")
			return 2
		}
		ctx, cancel := signalContext()
		defer cancel()
		var err error
		cfg, notes, err = rosStarter(ctx, starterConf{MasterURI: uri, RobotID: *id, Timeout: *timeout, Env: os.Getenv})
		if err != nil {
			sayln(stderr, "robot-bridge init:", err)
			return 1
		}
	default:
		sayf(stderr, "robot-bridge init: unknown --transport %q (allowed: ros, sim)\n", *kind)
		return 2
	}
	// What init writes must load: a starter that check-config refuses is
	// a bug, and nothing is written then.
	c, err := hwconfig.Parse(cfg)
	if err != nil {
		sayln(stderr, "robot-bridge init: the generated config does not validate (a bug; please report it):", err)
		return 1
	}
	report := stdout
	if *out == "" {
		if _, err := stdout.Write(cfg); err != nil {
			sayln(stderr, "robot-bridge init:", err)
			return 1
		}
		report = stderr
	} else {
		if err := os.WriteFile(*out, cfg, 0o644); err != nil {
			sayln(stderr, "robot-bridge init:", err)
			return 1
		}
		sayf(report, "robot-bridge init: wrote %s (robot %s, transport %s, tools: %v)\n", *out, c.Robot.ID, c.Transport.Kind, c.ToolNames())
	}
	if len(notes) > 0 {
		sayln(report, "Review before the first motion; init could not determine:")
		for _, n := range notes {
			sayf(report, "  - %s\n", n)
		}
	}
	return 0
}

// starterConf is what rosStarter needs.
type starterConf struct {
	MasterURI string
	RobotID   string
	// Timeout bounds the master query and the odometry read.
	Timeout time.Duration
	// Env reads ROS_IP / ROS_HOSTNAME for init's short-lived node.
	Env func(string) string
}

// rosStarter reads the graph of the master at conf.MasterURI, matches it,
// reads the robot's pose and renders the starter config. It returns the
// config and, one sentence each, what it could not determine.
func rosStarter(ctx context.Context, conf starterConf) ([]byte, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, conf.Timeout)
	defer cancel()
	g, err := ros.Discover(ctx, conf.MasterURI)
	if err != nil {
		return nil, nil, err
	}
	m := g.Match()
	s := hwconfig.ROSStarter{
		RobotID: conf.RobotID, MasterURI: conf.MasterURI,
		Odom: m.Odom, CmdVel: m.CmdVel, MoveBase: m.MoveBase, Battery: m.Battery, EStop: m.EStop,
	}
	if s.RobotID == "" {
		// A host name names the robot; an address or localhost does not.
		if u, err := url.Parse(conf.MasterURI); err == nil && net.ParseIP(u.Hostname()) == nil && u.Hostname() != "localhost" {
			s.RobotID = hwconfig.StarterID(u.Hostname())
		}
	}
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	if m.Odom == "" {
		note("no node publishes %s: odom_topic is the standard odom and the bridge will not start until the robot publishes it; the workspace is centred on (0, 0)", ros.TypeOdometry)
	} else {
		host := ""
		if conf.Env != nil {
			if host = conf.Env("ROS_IP"); host == "" {
				host = conf.Env("ROS_HOSTNAME")
			}
		}
		od, err := ros.ReadOdometry(ctx, conf.MasterURI, m.Odom, host, 10)
		switch {
		case errors.Is(err, ros.ErrNoOdometry):
			note("no message arrived on %s within %s: the workspace is centred on (0, 0), not on the robot", m.Odom, conf.Timeout)
		case err != nil:
			note("could not read %s (%v): the workspace is centred on (0, 0), not on the robot", m.Odom, err)
		default:
			s.Pose, s.PoseKnown, s.Frame, s.OdomPeriod = [3]float64{od.Pose.X, od.Pose.Y, od.Pose.Theta}, true, od.Frame, od.Period
			if od.Frame == "" {
				note("the odometry on %s names no frame_id: goals go to frame map; set transport.ros.frame to the frame its poses are in", m.Odom)
			}
			if od.Period == 0 {
				note("only one odometry message arrived: its rate is unknown, and safety.state_timeout is the 500ms minimum")
			}
		}
	}
	if m.CmdVel == "" {
		note("no node subscribes to a %s topic: cmd_vel_topic is the standard cmd_vel, where the bridge's stop goes", ros.TypeTwist)
	}
	if m.MoveBase == "" {
		note("no %s action server was found: base_mode is cmd_vel, the bridge driving on velocity commands and closing the loop on odometry", ros.TypeMoveBase)
	}
	if m.EStop == "" {
		note("no e-stop topic (%s) was found: the bridge's software e-stop is the only one; name the robot's in transport.ros.estop_topic if it has one", ros.TypeBool)
	}
	if m.Battery == "" {
		note("no %s topic was found: the bridge reports no battery", ros.TypeBatteryState)
	}
	if m.Arm != "" {
		s.Found = append(s.Found, fmt.Sprintf("an arm trajectory action (%s) at %s: an arm needs an arm section (joints, limits, link lengths), poses and a safe_pose.arm", ros.TypeFollowJointTrj, m.Arm))
	}
	if m.Gripper != "" {
		s.Found = append(s.Found, fmt.Sprintf("a gripper action (%s) at %s: it needs a gripper section and an arm", ros.TypeGripperCommand, m.Gripper))
	}
	if m.JointStates != "" && m.Arm != "" {
		s.Found = append(s.Found, fmt.Sprintf("joint states (%s) on %s: transport.ros.joint_states_topic, with the arm", ros.TypeJointState, m.JointStates))
	}
	if m.Detections != "" {
		s.Found = append(s.Found, fmt.Sprintf("detections (%s) on %s: they need a camera section (intrinsics and mount) and transport.ros.detections_topic", ros.TypeDetections, m.Detections))
	}
	for _, f := range s.Found {
		note("found %s", f)
	}
	notes = append(notes, m.Notes...)
	note("the speed and acceleration limits, the footprint radius (%g m) and the goal tolerances are conservative guesses, marked REVIEW", hwconfig.StarterRadius)
	note("the workspace is a %g m square around the robot's pose; draw the real free floor (and add world surfaces and keep-out regions)", 2*hwconfig.StarterHalfSide)
	return s.Render(), notes, nil
}
