package safety

import (
	"errors"

	"github.com/robot-bridge/robot-bridge/toolerr"
)

// ErrFenced says this bridge does not hold the robot's lease now (a cluster
// of bridges in front of one fleet, where each robot is driven by one
// bridge at a time), so the gate sends it nothing but stops.
var ErrFenced = errors.New("robot lease not held")

// TripLeaseLost is the trip of a bridge that lost the robot's lease
// during a motion (it could not renew it in time, or another bridge took
// the robot over).
const TripLeaseLost TripKind = "lease_lost"

// Fence says whether this bridge may command the robot now. In a cluster
// of bridges it is the robot's lease: Hold answers nil only while the
// bridge holds the lease with time to spare before it could expire, so a
// command it admits reaches the robot before any other bridge could take
// the robot over. Hold must be fast and must not block (it runs in the
// gate and in every control period of a motion).
type Fence interface {
	// Hold returns nil while this bridge may command the robot, or an
	// error saying why not and who drives the robot instead; a
	// *toolerr.Error is passed to the agent as it is (its type, its
	// suggestion), any other error becomes UNAVAILABLE.
	Hold() error
}

// fenceErr is the gate's check of the fence: nil without one.
func (s *Supervisor) fenceErr() error {
	if s.fence == nil {
		return nil
	}
	err := s.fence.Hold()
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*toolerr.Error](err); ok {
		if errors.Is(te, ErrFenced) {
			return te
		}
		cp := *te
		cp.Err = errors.Join(ErrFenced, te.Err)
		return &cp
	}
	return toolerr.New(toolerr.Unavailable, "this bridge does not hold the robot's lease (%v); nothing was sent", err).
		Wrap(errors.Join(ErrFenced, err))
}
