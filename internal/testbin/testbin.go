// Package testbin builds the robot-bridge binary for tests that run it as
// its own process: a simulator playing the robots over ROS or MQTT, a
// second bridge of a cluster, a bridge killed with SIGKILL. It is built
// once per test binary, without the race detector (the process is the
// robot or the peer, not what the test examines), into a temporary
// directory that Cleanup removes.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the import path of the robot-bridge command.
const Package = "github.com/robot-bridge/robot-bridge/cmd/robot-bridge"

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// RobotBridge returns the path of the robot-bridge binary, building it on
// the first call of the test binary; a failed build fails tb with the
// compiler's output.
func RobotBridge(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		goBin, lerr := exec.LookPath("go")
		if lerr != nil {
			goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		}
		if dir, err = os.MkdirTemp("", "robot-bridge-bin-"); err != nil {
			return
		}
		bin := filepath.Join(dir, "robot-bridge")
		out, berr := exec.Command(goBin, "build", "-o", bin, Package).CombinedOutput()
		if berr != nil {
			err = fmt.Errorf("go build %s: %w: %s", Package, berr, out)
			return
		}
		path = bin
	})
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Cleanup removes the built binary, if any; call it from TestMain after
// m.Run.
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir) // a temp dir of our own; nothing else lives there
	}
}

// Main is a TestMain for a package that uses RobotBridge: it runs the
// tests, removes the built binary and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}
