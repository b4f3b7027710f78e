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
