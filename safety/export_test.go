package safety

import "time"

// SettledAt reports, for harnesses that step a fake clock, whether the
// supervised motion (if any) has processed every tick due at or before t
// and is blocked waiting for the next tick or state.
func SettledAt(s *Supervisor, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active == nil {
		return true
	}
	return s.active.blocked && s.active.nextTick.After(t)
}
