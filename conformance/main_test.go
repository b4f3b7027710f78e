package conformance

import (
	"testing"

	"github.com/robot-bridge/robot-bridge/internal/testbin"
)

func TestMain(m *testing.M) { testbin.Main(m) }
