package actions

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
)

// TestView_TerminalTasksCarryNoStaleProgress is the regression test for a
// faulted task listed as "driving to the dock: 7.30 m to go" (issue 14):
// once a task has ended, whatever its status, its view's progress phrase
// is empty and its text alone says how it ended; a live task keeps its
// progress.
func TestView_TerminalTasksCarryNoStaleProgress(t *testing.T) {
	r := &Runner{}
	for _, st := range fsm.AllStates() {
		t.Run(string(st), func(t *testing.T) {
			// Given a task in st whose last progress was mid-drive
			tk := &task{id: "task-1", m: fsm.New(st), progress: Progress{Fraction: 0.4, Text: "driving to dock, 7.30 m to go"}, text: "It ended."}
			// When it is viewed
			v := r.viewLocked(tk)
			// Then a terminal task shows no progress phrase, a live one does
			if st.Terminal() {
				require.Empty(t, v.Progress.Text)
			} else {
				require.Equal(t, "driving to dock, 7.30 m to go", v.Progress.Text)
			}
			require.InDelta(t, 0.4, v.Progress.Fraction, 1e-12, "how far it came stays")
			require.Equal(t, "It ended.", v.Text)
		})
	}
}
