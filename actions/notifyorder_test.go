package actions

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/fsm"
)

// A progress view taken while the task was stopping must never reach the
// observers after the view of its end: under load the console and the
// agent's stream showed a recovered task as "stopping" until the next
// event, because the progress view was delivered last.
func TestNotify_ATasksViewsArriveInTheOrderTheyWereTaken(t *testing.T) {
	var mu sync.Mutex
	var seen []fsm.State
	inNotify, release := make(chan struct{}), make(chan struct{})
	r := &Runner{clock: clockwork.NewRealClock(), log: slog.New(slog.DiscardHandler)}
	r.obs = ObserverFunc(func(v TaskView) {
		if v.Progress.Text == "braking" {
			// Given the progress view on its way to the observers, held
			close(inNotify)
			<-release
		}
		mu.Lock()
		seen = append(seen, v.Status)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tk := &task{
		id: "task-1", req: Request{Tool: "move_base_to"}, m: fsm.New(fsm.Stopping),
		ctx: ctx, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{}),
	}
	go r.setProgress(tk, Progress{Fraction: 0.4, Text: "braking"})
	<-inNotify

	// When the task ends meanwhile
	fired := make(chan error, 1)
	go func() { fired <- r.fire(tk, fsm.EvStopConfirmed, trOpts{by: "supervisor"}) }()
	select {
	case err := <-fired:
		t.Fatalf("the end was delivered while an older view was still on its way (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-fired)

	// Then the observers saw the stopping view first and the end last
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []fsm.State{fsm.Stopping, fsm.Cancelled}, seen)
}
