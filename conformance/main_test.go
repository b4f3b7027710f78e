package conformance

import (
	"os"
	"testing"

	"github.com/robot-bridge/robot-bridge/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
