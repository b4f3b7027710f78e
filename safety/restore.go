package safety

// RestoreLatches sets the e-stop and fault latches a previous run left
// latched, as the store recorded them, so a restart never forgets them
// (ARCHITECTURE.md, invariants 4, 6 and 8): until an operator resets the
// e-stop or clears the fault, every motion is refused exactly as if the
// bridge had never stopped. The bridge calls it at start, before the API
// opens. A latch that is already set keeps its own cause, and a latch
// passed inactive is left alone: restoring never releases anything. No
// event is emitted, because nothing new happened; the store already holds
// the original events.
func (s *Supervisor) RestoreLatches(estop EStopStatus, fault FaultStatus) {
	s.mu.Lock()
	restoredE := estop.Active && !s.estop.Active
	if restoredE {
		s.estop = estop
		s.latchGen++
	}
	restoredF := fault.Latched && !s.fault.Latched
	if restoredF && fault.What == "" {
		// The store keeps the developer reason only.
		fault.FaultWords = restoredFaultWords()
	}
	if restoredF {
		s.fault = fault
		s.latchGen++
	}
	a := s.active
	s.mu.Unlock()
	if a != nil {
		a.poke()
	}
	if restoredE {
		s.log.Warn("e-stop latch restored from the store; an operator must reset it", "by", estop.By, "reason", estop.Reason, "since", estop.Since)
	}
	if restoredF {
		s.log.Warn("fault latch restored from the store; an operator must clear it", "reason", fault.Reason, "task", fault.TaskID, "since", fault.Since)
	}
}

// MirrorLatches makes the e-stop and fault latches exactly what another
// bridge recorded for this robot, setting and releasing alike. It is for a
// robot this bridge does not command — in a cluster of bridges, a robot
// whose lease another bridge holds, so the fence refuses every motion here
// whatever the latches say — so that the bridge answers every reader
// truly and, should it take the robot over, starts from the owner's
// latches. Like RestoreLatches it emits no event (the owner recorded the
// change), and a motion that is somehow running is poked so it sees a new
// e-stop at once. It reports whether anything changed.
func (s *Supervisor) MirrorLatches(estop EStopStatus, fault FaultStatus) bool {
	s.mu.Lock()
	changed := s.estop.Active != estop.Active || s.fault.Latched != fault.Latched
	if estop.Active != s.estop.Active || (estop.Active && s.estop != estop) {
		s.estop = estop
		if !estop.Active {
			s.estop = EStopStatus{}
		}
		s.latchGen++
	}
	if fault.Latched != s.fault.Latched {
		if fault.Latched && fault.What == "" {
			fault.FaultWords = restoredFaultWords()
		}
		if !fault.Latched {
			fault = FaultStatus{}
		}
		s.fault = fault
		s.latchGen++
	}
	a := s.active
	s.mu.Unlock()
	if a != nil {
		a.poke()
	}
	if changed {
		s.log.Info("latches mirrored from the robot's owning bridge", "estop", estop.Active, "fault", fault.Latched)
	}
	return changed
}
