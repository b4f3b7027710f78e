// Command robot-bridge is the daemon that lets an LLM agent operate a robot
// through tools, with a safety supervisor in between.
//
// Its subcommands (serve is the default) come from one table in main.go,
// which both the dispatch and `robot-bridge --help` read, so the help
// lists every command there is; `robot-bridge COMMAND --help` names a
// command's arguments and flags.
//
// main only parses flags, turns SIGINT/SIGTERM into context cancellation
// and calls into package bridge, which holds the wiring. serve binds its
// address before package bridge writes tokens or opens the store, so a busy
// port leaves nothing behind.
package main
