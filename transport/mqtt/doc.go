// Package mqtt is the MQTT transport: a driver (safety.Driver) that
// reaches one robot through an MQTT broker with versioned JSON payloads, a
// Fleet that reaches many robots over one broker connection (one driver
// each),
// the payload types and their strict decoders (fuzzed), the JSON Schemas
// robots written in other languages implement (schema/), an embedded
// broker (mochi-mqtt) for the zero-setup run, and the transport's metrics.
//
// Topics, under a configurable prefix (Topics):
//
//	{prefix}/{id}/state          robot → bridge, retained: State (session, seq, stamp)
//	{prefix}/{id}/cmd/{action}   bridge → robot, QoS 1: Command (id, issued, deadline)
//	{prefix}/{id}/ack            robot → bridge, QoS 1: Ack (accepted, progress, done, failed)
//	{prefix}/{id}/events         robot → bridge: Event
//	{prefix}/{id}/status         robot, retained: online; last will offline
//	{prefix}/{id}/bridge         bridge, retained: online; last will offline (one-robot driver)
//	{prefix}/bridge              fleet bridge, retained: online; last will offline
//	{prefix}/bridge-{bridge}     cluster bridge {bridge}, retained: online; last will offline
//
// Safety lines the driver holds: Send returns only once the robot acked
// accepted (a failed ack, no ack within ack_timeout or a lost link is an
// error, and the supervisor stops and recovers); Stop is published QoS 1
// under its own id, never waits behind a Send, and fails at once without a
// broker connection; LinkUp needs the connection, the robot's status
// online and a fresh state; incoming payloads that are oversized,
// malformed, of another version, invalid, out of order, stale or from the
// future are dropped, counted by reason and logged once per burst, never
// acted on; after a reconnect the driver resubscribes and replays no
// motion command (a robot refuses one past its deadline and acts on an id
// once).
//
// Fleets. A bridge in front of a thousand robots holds one connection,
// not a thousand: NewFleet takes every robot's hw-config and hands out one
// Driver per robot, each with the semantics above, over one paho client
// subscribed with wildcards ({prefix}/+/state, +/ack, +/status, +/events).
// Messages are dispatched by the id level of their topic to the robot's
// driver (an id not of the fleet is dropped as unknown_robot) and decoded
// on a few goroutines, each robot's always on the same one, so one robot's
// messages keep their order. A robot's last will takes its own link down;
// a lost broker connection takes every robot's down at once. The fleet
// owns the connection and counts its users: the first Start connects, the
// last Close disconnects, so closing one robot's driver never cuts the
// others off. Metrics are one set per fleet, their labels closed sets (no
// robot label). One connection carries one last will, so a fleet bridge's
// is on {prefix}/bridge, which robots watch beside their own
// {prefix}/{id}/bridge (the simulator does); a robot that watches only its
// own topic learns of a dead fleet bridge from its command watchdog. A
// fleet bridge owns its topic prefix: two fleets on one broker use two
// prefixes. New is a fleet of one that subscribes to its robot's topics
// only, with its last will on the robot's bridge topic, as before fleets.
//
// The simulator's side (simnode) can share one connection among many
// robots too (simnode.Link); see that package for what that costs.
//
// # Fencing: several bridges, one fleet
//
// Several bridges may stand in front of one fleet (a cluster, each with
// its FleetConf.BridgeID). Each robot is owned by at most one of them at
// a time through a lease whose epoch grows by one on every acquisition.
// Every command of a cluster bridge (motion, stop, refresh) carries
// "epoch" (the lease's) and "bridge" (its id); a bridge on its own sends
// neither, and a payload without them counts as epoch 0. What a robot
// implementing this contract must do:
//
//   - Keep the newest epoch it has seen on any command, stop or refresh
//     it obeyed (start at 0; a robot that restarts may start at 0 again,
//     as the bridge that owns it sends a stop with its epoch first).
//   - Refuse a motion command whose epoch is older than the newest: ack
//     failed with a reason that starts "stale_epoch: " (naming both
//     epochs helps operators), and move nothing. A command of the same
//     or a newer epoch is judged as ever (dedupe, deadline, stops), and a
//     newer one raises the newest.
//   - Always obey a stop, whatever its epoch: stopping is always safe. A
//     stop of a newer epoch raises the newest: a bridge that takes a
//     robot over stops it first, which fences the old owner for good. A
//     stop of an older epoch should not make the robot refuse the current
//     owner's commands issued before it (the two bridges' clocks differ).
//   - Ignore a refresh of an older epoch: it does not feed the command
//     watchdog, so a bridge that lost the robot cannot keep a motion
//     alive.
//   - Watch {prefix}/+ and, when {prefix}/bridge-{b} says offline (bridge
//     b's last will), stop if b is the bridge whose command or refresh it
//     obeyed last; another bridge's death is none of its business. The
//     robot's own {prefix}/{id}/bridge and the lone fleet's
//     {prefix}/bridge still stop it whoever says offline there, so the
//     bridges of a cluster never publish on them.
//
// The bridge side: a fleet with a BridgeID takes each robot's epoch from
// the robot's Fence (Driver.SetFence, Fleet.SetFence), publishes a motion
// or refresh only while the fence says the lease is held (else ErrFenced,
// nothing sent), always publishes a stop (with the last epoch it knew),
// reports a robot's stale_epoch refusal as ErrRefused and ErrFenced, and
// at Close stops only the robots it holds. Its MQTT client id gets
// "-{bridge}" appended, so bridges sharing one hw-config do not take each
// other's connection over. Every bridge of a cluster sees every robot's
// acks; those for another bridge's commands are dropped as
// unknown_command.
package mqtt
