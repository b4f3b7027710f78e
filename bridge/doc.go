// Package bridge wires every part of robot-bridge into one embeddable
// daemon: New(conf) / Start(ctx) / Stop(ctx) / Addr(). A test boots the
// whole bridge in-process on 127.0.0.1:0 with a t.TempDir() data dir; the
// robot-bridge command does the same with flags. Bridge holds wiring only:
// every decision lives in the packages it connects.
package bridge
