// Package inproc is the in-process transport: it runs the bundled simulator
// (package sim) in real time inside the bridge and exposes it through the
// same driver contract as the ROS1 and MQTT transports, so the zero-setup
// default exercises the exact code path a real robot does.
//
// The driver realises the simulator's transport-level faults: link_down makes
// every call fail with ErrLinkDown and silences state, delay_ack delays
// command acceptance, and drop_state drops publications. A Stop never waits
// behind a delayed Send, and a Send still waiting for its acceptance when a
// Stop arrives is dropped (ErrSuperseded) instead of starting a motion after
// the stop.
package inproc
