// Package simnode runs the bundled simulator (package sim) as an MQTT
// robot speaking the transport/mqtt contract: it publishes its state
// retained at the simulator's state rate with a session id, a sequence
// number and a stamp, executes motion commands and acks them accepted,
// progress now and then, and done or failed as the simulator's controllers
// finish, and announces
// itself on its status topic with the last will offline.
//
// Delivery is safe to repeat: a command id is acted on once (a QoS 1
// redelivery is answered with the first answer, marked duplicate, and is
// logged by the simulator as a duplicate that moved nothing); a motion
// that arrives after its deadline, or that was issued before the newest
// stop the node received, is refused. Stops act at once, never behind a
// delayed ack. The simulator's command watchdog is fed by the bridge's
// refreshes, and the bridge's own last will (offline on {prefix}/{id}/bridge)
// stops the robot at once.
//
// Transport faults injected into the simulator act on the wire as over
// ROS: link_down swallows commands, refreshes and state (not stops),
// drop_state drops state, delay_ack delays the accepted ack. Disconnect
// and Connect cut and restore the robot's network abruptly, so the broker
// publishes its last will.
//
// Many robots in one process. Each Node is one robot with its own
// simulator, dedupe by command id, deadline and stop checks, command
// watchdog and faults. By default each also has its own connection, and so
// its own last will: a robot whose process dies is offline at the bridge
// within 1.5 keepalives. A Link puts many nodes on one connection instead
// (robot-bridge sim --share-connection), which is what makes a thousand
// simulated robots in one process practical (a thousand connections cost a
// thousand sockets on both ends and a thousand keepalives). The price is
// the per-robot last will, as one connection carries one: a node on a link
// says offline itself when it closes or is disconnected, but a killed
// process leaves its robots' status online, and the bridge learns of it
// from the silence of their states (its state timeout takes each link
// down, and the supervisor's silence watchdog stops the motion). The
// default stays one connection per robot, because a robot's last will is
// the faster and more faithful signal and the sim process is where the
// bridge's reaction to it is tested; the shared link is for scale runs.
// Both watch {prefix}/bridge, a fleet bridge's last will, beside each
// robot's {prefix}/{id}/bridge.
//
// Several bridges (a cluster; see package mqtt, "Fencing"). A node hands
// each command's epoch and bridge id to the simulator, which keeps the
// newest epoch: a motion command of an older epoch is refused (ack failed
// "stale_epoch: …", logged in the simulator's command log with its epoch
// and bridge), a stop of any epoch is obeyed (one of an older epoch does
// not refuse the current owner's commands issued before it), a refresh of
// an older epoch feeds no watchdog. The node remembers the bridge of the
// last motion it accepted or refresh it obeyed, watches {prefix}/+ and
// stops when {prefix}/bridge-{that bridge} says offline (logged as a stop
// with the reason, and as a bridge_offline event); another bridge's
// offline leaves it alone.
package simnode
