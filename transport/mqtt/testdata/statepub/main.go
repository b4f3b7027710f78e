// Command statepub plays a fleet of robots for the transport's benchmarks,
// in a process of its own so the bridge's measured CPU and memory are the
// bridge's alone: over one connection it announces -robots robots online
// (retained, as each robot's status) and publishes each one's state at
// -hz, spread evenly over the period, with a session, a sequence number
// and a stamp, as a robot does. Every 100 ms it prints "sent N", the
// states published so far. It runs until stdin closes or it is killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/robot-bridge/robot-bridge/robot"
	"github.com/robot-bridge/robot-bridge/transport/mqtt"
)

func main() {
	broker := flag.String("broker", "tcp://127.0.0.1:1883", "broker `URL`")
	prefix := flag.String("prefix", "robots", "topic `PREFIX`")
	idPrefix := flag.String("id-prefix", "r", "robot ids are `PREFIX`1 … PREFIXn")
	robots := flag.Int("robots", 100, "`N` robots")
	hz := flag.Float64("hz", 10, "state rate of each robot, in `HZ`")
	flag.Parse()
	if *robots < 1 || *hz <= 0 {
		fmt.Fprintln(os.Stderr, "statepub: -robots must be at least 1 and -hz above 0")
		os.Exit(2)
	}
	c := paho.NewClient(paho.NewClientOptions().AddBroker(*broker).SetClientID(fmt.Sprintf("statepub-%d", os.Getpid())).
		SetCleanSession(true).SetWriteTimeout(time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		fmt.Fprintln(os.Stderr, "statepub: connect:", tok.Error())
		os.Exit(1)
	}
	topics := make([]mqtt.Topics, *robots)
	for i := range topics {
		topics[i] = mqtt.Topics{Prefix: *prefix, ID: fmt.Sprintf("%s%d", *idPrefix, i+1)}
		c.Publish(topics[i].Status(), 1, true, mqtt.StatusOnline).WaitTimeout(5 * time.Second)
	}
	var sent atomic.Uint64
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			fmt.Printf("sent %d\n", sent.Load())
		}
	}()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		c.Disconnect(100)
		os.Exit(0)
	}()
	// A robot's state as the simulator's: a pose, a twist, four joints, a
	// gripper and a battery.
	st := robot.State{
		Base: robot.Pose2D{X: 1, Y: 2, Theta: 0.5}, Velocity: robot.Twist2D{V: 0.2},
		Joints:  []robot.Joint{{Name: "shoulder_yaw", Position: 0.1}, {Name: "shoulder_pitch", Position: 0.6}, {Name: "elbow", Position: -1.2}, {Name: "wrist", Position: 0.6}},
		Gripper: &robot.Gripper{Opening: 0.09}, Battery: robot.Battery{Known: true, Percent: 95, Voltage: 24},
	}
	const slots = 10 // ticks per period: each publishes a tenth of the robots
	period := time.Duration(float64(time.Second) / *hz)
	tick := time.NewTicker(period / slots)
	seq := make([]uint64, *robots)
	for slot := 0; ; slot = (slot + 1) % slots {
		<-tick.C
		for i := slot; i < *robots; i += slots {
			seq[i]++
			st.Base.X = float64(i)
			raw, err := mqtt.Marshal(mqtt.StateFrom(st, "statepub", seq[i], time.Now()))
			if err != nil {
				fmt.Fprintln(os.Stderr, "statepub:", err)
				os.Exit(1)
			}
			c.Publish(topics[i].State(), 0, false, raw)
			sent.Add(1)
		}
	}
}
