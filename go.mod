module github.com/robot-bridge/robot-bridge

go 1.26.8

require (
	github.com/goccy/go-yaml v1.19.2
	github.com/looplab/fsm v1.0.3
)
