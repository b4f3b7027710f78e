package store

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
)

// Environment of the child process of TestCrash_GroupCommitLosesNothing.
const (
	envCrashChildDir = "ROBOT_BRIDGE_STORE_CRASH_CHILD_DIR"
	envCrashChildDSN = "ROBOT_BRIDGE_STORE_CRASH_CHILD_DSN"
	envCrashChildRun = "ROBOT_BRIDGE_STORE_CRASH_CHILD_RUN"
)

// crashWriters is how many robots the child writes for at once.
const crashWriters = 8

// TestCrash_GroupCommitLosesNothing is invariant 8 for the batch and the
// group commit: a child process records, for eight robots at once, the
// three records a pre-authorized call writes before its first command
// (RecordTransitions, so their commits are grouped) and one more
// transition, and prints each write it was told is committed; it is
// killed with SIGKILL at a random point, several times over the same
// store. Every acknowledged write is then on the disk, whole, and no
// write is there in part: a task has none of its batch's records or all
// of them.
func TestCrash_GroupCommitLosesNothing(t *testing.T) {
	if dir := os.Getenv(envCrashChildDir); dir != "" {
		crashChild(t, dir, os.Getenv(envCrashChildDSN), os.Getenv(envCrashChildRun))
		return
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x67726f7570))
	forEachEngine(t, func(t *testing.T, e *testEngine) {
		dir := t.TempDir()
		dsn := ""
		if e.driver == DriverPostgres {
			dsn = e.dsn(t, dir)
		}
		acked := map[string]int{} // task id → writes acknowledged (3, then 4)
		for run := range 4 {
			kill := 20 + rng.IntN(200)
			n := crashRun(t, dir, dsn, fmt.Sprintf("run%d", run), kill, acked)
			t.Logf("run %d: killed after %d acknowledged writes", run, n)
		}
		// Then every acknowledged write is there, whole, and nothing is
		// there in part.
		s, _ := e.open(t, dir)
		ctx := context.Background()
		all, err := s.Transitions(ctx, "")
		require.NoError(t, err)
		rows := map[string]int{}
		for _, tr := range all {
			rows[tr.TaskID]++
		}
		audit := map[string]int{}
		require.NoError(t, s.ExportAudit(ctx, AuditQuery{Type: "task"}, func(r AuditRecord) error {
			audit[r.TaskID]++
			return nil
		}))
		for id, n := range acked {
			require.GreaterOrEqual(t, rows[id], n, "task %s: acknowledged %d records, %d on the disk", id, n, rows[id])
		}
		for id, n := range rows {
			require.Contains(t, []int{3, 4}, n, "task %s has %d of its records: a batch landed in part", id, n)
			require.Equal(t, n, audit[id], "task %s: %d transitions, %d audit records", id, n, audit[id])
			v, err := s.Task(ctx, id)
			require.NoError(t, err)
			require.NotEmpty(t, v.Status, id)
		}
	})
}

// crashRun starts the child on dir, reads its acknowledgements into acked
// until kill of them arrived, kills it with SIGKILL and returns how many
// it read.
func crashRun(t *testing.T, dir, dsn, run string, kill int, acked map[string]int) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrash_GroupCommitLosesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashChildDir+"="+dir, envCrashChildDSN+"="+dsn, envCrashChildRun+"="+run)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	n := 0
	for n < kill && sc.Scan() {
		id, count, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(id, run) {
			continue
		}
		acked[id] = map[string]int{"3": 3, "4": 4}[count]
		n++
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Equal(t, kill, n, "the child ended first: %s", stderr.String())
	return n
}

// crashChild writes until it is killed.
func crashChild(t *testing.T, dir, dsn, run string) {
	c := Conf{Dir: dir, Logger: quietLogger()}
	if dsn != "" {
		c.Driver, c.DSN = DriverPostgres, dsn
	}
	s, err := Open(context.Background(), c)
	require.NoError(t, err)
	var mu sync.Mutex
	ack := func(id string, n int) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(os.Stdout, "%s %d\n", id, n)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for k := range crashWriters {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("%s-r%d-%d", run, k, i)
				recs := preauthorized(id, t0)
				for j := range recs {
					recs[j].RobotID = fmt.Sprintf("r%d", k)
				}
				if err := s.RecordTransitions(ctx, recs); err != nil {
					t.Error(err)
					return
				}
				ack(id, 3)
				last := recs[2]
				last.From, last.To, last.Event, last.By = last.To, "succeeded", "succeed", "supervisor"
				if err := s.RecordTransitions(ctx, []actions.TransitionRecord{last}); err != nil {
					t.Error(err)
					return
				}
				ack(id, 4)
			}
		})
	}
	wg.Wait()
}
