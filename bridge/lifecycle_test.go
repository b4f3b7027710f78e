package bridge

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/store"
)

// Lifecycle tests (issue 11, item 0): whatever New and Start acquire is
// given back when they fail, and Stop is safe at any point of the life.

// newAt builds (without starting) a bridge on dir with the test tokens.
func newAt(t *testing.T, dir, listen string) (*Bridge, error) {
	t.Helper()
	return New(Conf{Config: testConfig(t, nil), Listen: listen, DataDir: dir, Env: testEnv})
}

// stopNow stops b with a bounded context and requires it to succeed.
func stopNow(t *testing.T, b *Bridge) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, b.Stop(ctx))
}

func TestNew_FailedConstructorReleasesStoreLock(t *testing.T) {
	// Given a config every part up to the store accepts but the safety
	// supervisor refuses, so New fails after the store has opened
	dir := t.TempDir()
	bad := testConfig(t, nil)
	bad.SafePose.Gripper = "squeeze"

	// When New fails on it
	_, err := New(Conf{Config: bad, Listen: "127.0.0.1:0", DataDir: dir, Env: testEnv})
	require.ErrorContains(t, err, "bridge: supervisor")
	require.FileExists(t, filepath.Join(dir, store.DefaultFile), "the store had opened before the failure")

	// Then a second New in the same process on the same data dir gets the
	// store (the failed one gave its file lock back) and runs
	b, err := newAt(t, dir, "127.0.0.1:0")
	require.NoError(t, err, "the failed New kept the store's file lock")
	require.NoError(t, b.Start(context.Background()))
	stopNow(t, b)
}

func TestStop_BeforeStartIsSafe(t *testing.T) {
	// Given a bridge that was built but never started
	dir := t.TempDir()
	b, err := newAt(t, dir, "127.0.0.1:0")
	require.NoError(t, err)

	// When it is stopped, twice
	stopNow(t, b)
	stopNow(t, b)

	// Then it cannot be started any more
	require.ErrorContains(t, b.Start(context.Background()), "stopped")
	// And it gave the store back: another bridge opens the data dir
	b2, err := newAt(t, dir, "127.0.0.1:0")
	require.NoError(t, err, "Stop before Start kept the store's file lock")
	require.NoError(t, b2.Start(context.Background()))
	// And closing the never-started bridge counts as a clean shutdown
	require.True(t, b2.Recovery().CleanShutdown, "closing an unstarted bridge is a clean shutdown")
	stopNow(t, b2)
}

func TestStart_FailedStartReleasesDriverSupervisorAndStore(t *testing.T) {
	// Given a bridge whose listen address is taken, so Start fails at its
	// last step, after the robot link, the supervisor, the recovery and
	// the background goroutines were all up
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	dir := t.TempDir()
	b, err := newAt(t, dir, taken.Addr().String())
	require.NoError(t, err)

	// When Start fails
	err = b.Start(context.Background())
	require.ErrorContains(t, err, "listen on "+taken.Addr().String())

	// Then the robot link is closed (the simulator's loop no longer runs)
	require.False(t, b.first().drv.LinkUp(), "the failed Start left the robot link up")
	// And Stop has nothing left to do, and a retry is refused
	stopNow(t, b)
	require.ErrorContains(t, b.Start(context.Background()), "stopped")
	// And the store and its file lock were given back: a new bridge on
	// the same data dir starts, and finds the failed one shut down cleanly
	b2, err := newAt(t, dir, "127.0.0.1:0")
	require.NoError(t, err, "the failed Start kept the store's file lock")
	require.NoError(t, b2.Start(context.Background()))
	require.True(t, b2.Recovery().CleanShutdown)
	stopNow(t, b2)
}

func TestStop_ReleasesInOrderWithTheDriversStopLast(t *testing.T) {
	// Given a running bridge
	b, err := newAt(t, t.TempDir(), "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, b.Start(context.Background()))
	b.td.mu.Lock()
	var names []string
	for _, s := range b.td.steps {
		names = append(names, s.name)
	}
	b.td.mu.Unlock()

	// Then its releases run newest first: the API closes, pending
	// approvals are cancelled, live tasks end, the background goroutines
	// stop, the supervisor stops the robot, the store closes, and the
	// driver's final stop is the very last
	want := []string{"http", "runners", "approvals", "background", "supervisor sim-1", "store", "robot link sim-1"}
	var order []string
	for _, name := range slices.Backward(names) {
		order = append(order, name)
	}
	require.Equal(t, want, order)
	stopNow(t, b)
	// And once stopped nothing is left to release
	b.td.mu.Lock()
	require.Empty(t, b.td.steps)
	b.td.mu.Unlock()
}
