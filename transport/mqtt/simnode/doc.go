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
package simnode
