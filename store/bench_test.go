package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/robot-bridge/robot-bridge/actions"
	"github.com/robot-bridge/robot-bridge/fsm"
	hwconfig "github.com/robot-bridge/robot-bridge/hw-configs"
	"github.com/robot-bridge/robot-bridge/safety"
	"github.com/robot-bridge/robot-bridge/sim"
	"github.com/robot-bridge/robot-bridge/transport/inproc"
)

// Benchmarks (issue 6): how many transitions per second a durable
// (synchronous=FULL) store takes, what one durable transition adds to the
// action path before its motion command may leave, and that the stop path
// does not wait on the disk.

// latencies collects per-operation durations for percentiles.
type latencies []time.Duration

func (l latencies) report(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	s := slices.Clone(l)
	slices.Sort(s)
	p := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))].Nanoseconds()) / 1000 }
	b.ReportMetric(p(0.50), prefix+"p50-µs")
	b.ReportMetric(p(0.99), prefix+"p99-µs")
}

// reportMS reports l's p50 and p99 in milliseconds (prefix+"p50-ms",
// prefix+"p99-ms").
func (l latencies) reportMS(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	b.ReportMetric(ms(l.quantile(0.50)), prefix+"p50-ms")
	b.ReportMetric(ms(l.quantile(0.99)), prefix+"p99-ms")
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// ratio is a/b, 0 when b is.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// fsyncFloor is the floor of every durable commit, measured in the same
// run as the store: one 4 KiB page (a WAL frame's worth) written at the
// end of a file in the benchmark's temp dir — the store's file system —
// and fdatasync'd, as SQLite syncs its WAL on Linux. The file wraps at
// 4 MiB.
type fsyncFloor struct {
	f   *os.File
	off int64
	buf []byte
	lat latencies
}

func newFsyncFloor(b *testing.B) *fsyncFloor {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "floor"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(b, err)
	b.Cleanup(func() { _ = f.Close() })
	return &fsyncFloor{f: f, buf: make([]byte, 4096)}
}

// sample times one write and fdatasync.
func (f *fsyncFloor) sample(b *testing.B) {
	t1 := time.Now()
	if _, err := f.f.WriteAt(f.buf, f.off); err != nil {
		b.Fatal(err)
	}
	if err := datasync(f.f); err != nil {
		b.Fatal(err)
	}
	f.lat = append(f.lat, time.Since(t1))
	if f.off += int64(len(f.buf)); f.off >= 4<<20 {
		f.off = 0
	}
}

// report reports the floor (fsync-p50-ms, fsync-p99-ms) and lat's p50 and
// p99 as multiples of it (prefix+"p50/fsync", prefix+"p99/fsync").
func (f *fsyncFloor) report(b *testing.B, prefix string, lat latencies) {
	f.lat.reportMS(b, "fsync-")
	b.ReportMetric(ratio(lat.quantile(0.50), f.lat.quantile(0.50)), prefix+"p50/fsync")
	b.ReportMetric(ratio(lat.quantile(0.99), f.lat.quantile(0.99)), prefix+"p99/fsync")
}

// quantile is the q-quantile of l (0 for none).
func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// BenchmarkTransitionWrite is the durable write on the action path: a
// transition, the task's status and an audit record in one transaction,
// committed before RecordTransition returns. Its p50/p99 is what a
// recorded transition adds before the motion command it implies; the
// NORMAL case (not crash-safe on power loss) is the baseline that shows
// what the fsync costs.
func BenchmarkTransitionWrite(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, _ := openTest(b, b.TempDir(), func(c *Conf) { c.synchronous = sync })
			benchTransitions(b, s)
		})
	}
	b.Run("postgres", func(b *testing.B) {
		s, _ := newTestEngine(b, DriverPostgres).open(b, b.TempDir())
		benchTransitions(b, s)
	})
}

func benchTransitions(b *testing.B, s *Store) {
	ctx := context.Background()
	create(b, s, "task-bench", "move_base_to", map[string]any{"x": 1.0, "y": 2.0}, "agent", t0)
	lat := make(latencies, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		t1 := time.Now()
		err := s.RecordTransition(ctx, benchRecord(i))
		lat = append(lat, time.Since(t1))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(lat))/time.Since(start).Seconds(), "transitions/s")
	lat.report(b, "")
	lat.reportMS(b, "")
}

// BenchmarkDurableTransition is the durable transition of issue 19 on
// SQLite (synchronous=FULL): one RecordTransition per iteration, each
// followed by a bare 4 KiB write + fdatasync in the same file system (the
// floor no commit can beat), so the ratio is read within one run:
// p50-ms, p99-ms, fsync-p50-ms, fsync-p99-ms, p50/fsync, p99/fsync, and
// the allocations of one transition.
func BenchmarkDurableTransition(b *testing.B) {
	s, _ := openTest(b, b.TempDir())
	floor := newFsyncFloor(b)
	ctx := context.Background()
	create(b, s, "task-bench", "move_base_to", map[string]any{"x": 1.0, "y": 2.0}, "agent", t0)
	lat := make(latencies, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t1 := time.Now()
		err := s.RecordTransition(ctx, benchRecord(i))
		lat = append(lat, time.Since(t1))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		floor.sample(b)
		b.StartTimer()
	}
	b.StopTimer()
	lat.reportMS(b, "")
	floor.report(b, "", lat)
}

// preauthorized are the three records of a call authorized when it is
// made, as the runner hands them over before its first command.
func preauthorized(id string, at time.Time) []actions.TransitionRecord {
	return []actions.TransitionRecord{
		{TaskID: id, RobotID: "r1", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0, "y": 2.0}, To: fsm.Requested, At: at, By: "agent", Reason: "move the base 2.2 m"},
		{TaskID: id, RobotID: "r1", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0, "y": 2.0}, From: fsm.Requested, To: fsm.Approved, Event: fsm.EvPreauthorized, At: at, By: "config", Reason: "approval: never for move_base_to"},
		{TaskID: id, RobotID: "r1", Tool: "move_base_to", Arguments: map[string]any{"x": 1.0, "y": 2.0}, From: fsm.Approved, To: fsm.Executing, Event: fsm.EvStart, At: at, By: "supervisor"},
	}
}

// BenchmarkPreauthorizedCommit is what a call authorized when it is made
// (approval: never, or a scoped grant) writes before its first command
// may leave — created, approved, executing — as one commit
// (RecordTransitions, what the runner does) against three commits
// (RecordTransition each, what it did), alternately in one run, with the
// fsync floor: batch-p50-ms, batch-p99-ms, singles-p50-ms, singles-p99-ms,
// singles/batch-p50 (how many times faster), batch-p50/fsync.
func BenchmarkPreauthorizedCommit(b *testing.B) {
	for _, d := range Drivers {
		b.Run(string(d), func(b *testing.B) {
			s, _ := newTestEngine(b, d).open(b, b.TempDir())
			floor := newFsyncFloor(b)
			ctx := context.Background()
			var batch, singles latencies
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for k := range 2 {
					if (i+k)%2 == 0 {
						recs := preauthorized(fmt.Sprintf("task-batch-%d", i), t0.Add(time.Duration(i)))
						t1 := time.Now()
						if err := s.RecordTransitions(ctx, recs); err != nil {
							b.Fatal(err)
						}
						batch = append(batch, time.Since(t1))
						continue
					}
					recs := preauthorized(fmt.Sprintf("task-single-%d", i), t0.Add(time.Duration(i)))
					t1 := time.Now()
					for _, r := range recs {
						if err := s.RecordTransition(ctx, r); err != nil {
							b.Fatal(err)
						}
					}
					singles = append(singles, time.Since(t1))
				}
				floor.sample(b)
			}
			b.StopTimer()
			batch.reportMS(b, "batch-")
			singles.reportMS(b, "singles-")
			b.ReportMetric(ratio(singles.quantile(0.5), batch.quantile(0.5)), "singles/batch-p50")
			floor.report(b, "batch-", batch)
		})
	}
}

// BenchmarkGroupCommit is a fleet's transitions committed at once: 1, 4
// and 16 robots, each a goroutine recording its own task's transitions
// back to back on one store (SQLite, synchronous=FULL), b.N in all. It
// reports how many transitions shared a commit (transitions/commit, that
// is per fsync), each caller's p50-ms and p99-ms (a lone commit is never
// held back waiting for company: robots=1 is the single commit), the
// throughput, and the fsync floor measured before and after.
func BenchmarkGroupCommit(b *testing.B) {
	for _, robots := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("robots=%d", robots), func(b *testing.B) {
			s, _ := openTest(b, b.TempDir())
			floor := newFsyncFloor(b)
			ctx := context.Background()
			for k := range robots {
				create(b, s, fmt.Sprintf("task-r%d", k), "move_base_to", map[string]any{"x": 1.0}, "agent", t0)
			}
			each := max(b.N/robots, 1)
			for range min(each, 200) {
				floor.sample(b)
			}
			lats := make([]latencies, robots)
			commits0, writes0 := s.group.commits.Load(), s.group.writes.Load()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for k := range robots {
				wg.Go(func() {
					id, robot := fmt.Sprintf("task-r%d", k), fmt.Sprintf("r%d", k)
					lat := make(latencies, 0, each)
					for i := range each {
						r := benchRecord(i)
						r.TaskID, r.RobotID = id, robot
						t1 := time.Now()
						if err := s.RecordTransition(ctx, r); err != nil {
							b.Error(err)
							return
						}
						lat = append(lat, time.Since(t1))
					}
					lats[k] = lat
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			commits, writes := s.group.commits.Load()-commits0, s.group.writes.Load()-writes0
			for range min(each, 200) {
				floor.sample(b)
			}
			var all latencies
			for _, l := range lats {
				all = append(all, l...)
			}
			all.reportMS(b, "")
			b.ReportMetric(float64(writes)/float64(max(commits, 1)), "transitions/commit")
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "transitions/s")
			floor.report(b, "", all)
		})
	}
}

func benchRecord(i int) actions.TransitionRecord {
	return actions.TransitionRecord{
		TaskID: "task-bench", Tool: "move_base_to",
		From: fsm.Approved, To: fsm.Executing, Event: fsm.EvStart, At: t0.Add(time.Duration(i)), By: "supervisor", GrantID: "grt_1",
	}
}

// BenchmarkDurableTransitionEngines compares the engines in one run: each
// iteration records one durable transition on SQLite (synchronous=FULL,
// in the data dir) and one on PostgreSQL (synchronous_commit=on, on
// loopback), alternately, so both see the same machine at the same
// moment. It reports each engine's p50/p99 latency and sequential
// throughput, the PostgreSQL/SQLite ratios, and the throughput of four
// writers at once on each engine (PostgreSQL's write lock serializes
// commits, as SQLite's one writer does).
func BenchmarkDurableTransitionEngines(b *testing.B) {
	lite, _ := openTest(b, b.TempDir())
	pg, _ := newTestEngine(b, DriverPostgres).open(b, b.TempDir())
	ctx := context.Background()
	for _, s := range []*Store{lite, pg} {
		create(b, s, "task-bench", "move_base_to", map[string]any{"x": 1.0, "y": 2.0}, "agent", t0)
	}
	var latLite, latPG latencies
	var sumLite, sumPG time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for _, e := range []struct {
			s   *Store
			lat *latencies
			sum *time.Duration
		}{{lite, &latLite, &sumLite}, {pg, &latPG, &sumPG}} {
			t1 := time.Now()
			if err := e.s.RecordTransition(ctx, benchRecord(i)); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t1)
			*e.lat = append(*e.lat, d)
			*e.sum += d
		}
	}
	b.StopTimer()
	latLite.report(b, "sqlite-")
	latPG.report(b, "postgres-")
	b.ReportMetric(float64(len(latLite))/sumLite.Seconds(), "sqlite-transitions/s")
	b.ReportMetric(float64(len(latPG))/sumPG.Seconds(), "postgres-transitions/s")
	b.ReportMetric(latPG.quantile(0.5).Seconds()/latLite.quantile(0.5).Seconds(), "postgres/sqlite-p50-ratio")
	b.ReportMetric(latPG.quantile(0.99).Seconds()/latLite.quantile(0.99).Seconds(), "postgres/sqlite-p99-ratio")
	// Four writers at once, a fixed count each, per engine.
	const writers, each = 4, 200
	for _, e := range []struct {
		name string
		s    *Store
	}{{"sqlite", lite}, {"postgres", pg}} {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if err := e.s.RecordTransition(ctx, benchRecord(w*each+i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(writers*each)/time.Since(start).Seconds(), e.name+"-4writers-transitions/s")
	}
}

// BenchmarkStopWithSlowStore measures the supervisor's stop tool path —
// stop sent to the in-process simulator's driver, then the StopSent event
// handed to the store — with no store, with the store, and with a store
// whose disk takes 20 ms per commit. The stop latency (detection → driver
// accepted, from the event) and the Stop call itself stay flat: the store
// only enqueues; with the slow disk the queue fills and the excess is
// dropped and counted (dropped/op), never waited for. (The loop calls Stop
// a million times a second, far past any real stop rate, so even the fast
// disk drops most events here; at real rates nothing is dropped, and a
// latch change never is, see
// TestSafetyEvents_FullQueueDropsOtherEventsButNeverALatch for the policy.)
func BenchmarkStopWithSlowStore(b *testing.B) {
	cases := []struct {
		name  string
		store bool
		delay time.Duration
	}{
		{"no-store", false, 0},
		{"store", true, 0},
		{"store-20ms-disk", true, 20 * time.Millisecond},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var st *Store
			if tc.store {
				st, _ = openTest(b, b.TempDir(), func(c *Conf) {
					c.Clock = clockwork.NewRealClock()
					c.QueueSize = 256
					if tc.delay > 0 {
						c.beforeBatch = func() { time.Sleep(tc.delay) }
					}
				})
			}
			var mu sync.Mutex
			var stopLat latencies
			obs := safety.ObserverFunc(func(e safety.Event) {
				if e.Kind == safety.EventStopSent {
					mu.Lock()
					stopLat = append(stopLat, e.Latency)
					mu.Unlock()
				}
				if st != nil {
					st.SafetyEvent(e)
				}
			})
			sup := newSimSupervisor(b, obs)
			ctx := context.Background()
			calls := make(latencies, 0, b.N)
			b.ResetTimer()
			for b.Loop() {
				t1 := time.Now()
				if err := sup.Stop(ctx, "bench", "stop"); err != nil {
					b.Fatal(err)
				}
				calls = append(calls, time.Since(t1))
			}
			b.StopTimer()
			calls.report(b, "call-")
			mu.Lock()
			stopLat.report(b, "stop-latency-")
			mu.Unlock()
			if st != nil {
				b.ReportMetric(float64(st.Dropped())/float64(len(calls)), "dropped/op")
			}
		})
	}
}

func newSimSupervisor(b *testing.B, obs safety.Observer) *safety.Supervisor {
	b.Helper()
	cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
	require.NoError(b, err)
	clk := clockwork.NewRealClock()
	s, err := sim.New(cfg, sim.WithEpoch(clk.Now()))
	require.NoError(b, err)
	drv := inproc.New(s, inproc.Conf{Clock: clk, Logger: quietLogger()})
	require.NoError(b, drv.Start(context.Background()))
	b.Cleanup(func() { _ = drv.Close() })
	sup, err := safety.New(safety.Conf{Config: cfg, Driver: drv, Clock: clk, Logger: quietLogger(), Observer: obs})
	require.NoError(b, err)
	require.NoError(b, sup.Start(context.Background()))
	b.Cleanup(func() { _ = sup.Close() })
	return sup
}

// BenchmarkAuditPage reads one 100-record page from a trail of 20,000.
func BenchmarkAuditPage(b *testing.B) {
	s, _ := openTest(b, b.TempDir(), func(c *Conf) { c.synchronous = "OFF" })
	ctx := context.Background()
	for i := range 20000 / 3 {
		id := fmt.Sprintf("task-%d", i)
		create(b, s, id, "move_base_to", map[string]any{"x": 1.0}, "agent", t0)
		st := move(b, s, id, "move_base_to", fsm.Requested, fsm.EvPreauthorized, t0, "config")
		move(b, s, id, "move_base_to", st, fsm.EvStart, t0, "supervisor")
	}
	b.ResetTimer()
	for b.Loop() {
		recs, _, err := s.Audit(ctx, AuditQuery{Type: "task.executing", Limit: 100, Cursor: encodeCursor(10000)})
		if err != nil || len(recs) != 100 {
			b.Fatal(err, len(recs))
		}
	}
}

// BenchmarkActionPath is the added latency of a durable transition on the
// action path: from Submit of a call the config pre-authorizes to the
// first motion command leaving the supervisor for the simulator's driver.
// With the store, the three transitions of that path (created, approved
// by the config, and executing, which must be on the disk before the
// command is sent) are one commit; without, none. The difference of the
// two p50s is what durability costs an action. It reports the allocations
// of one approved command (Submit to the command, the runner, supervisor,
// driver and store together; the cancel and wait between samples are not
// counted) and, with the store, the commits per command (commits/cmd: the
// transitions' and the asynchronous writer's task views, until the task
// ended).
func BenchmarkActionPath(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "no-store"
		if durable {
			name = "store-synchronous=FULL"
		}
		b.Run(name, func(b *testing.B) {
			cfg, err := hwconfig.Load("../hw-configs/sim-mobile-manipulator.yaml")
			require.NoError(b, err)
			cfg.Actions["move_arm_to"] = hwconfig.ActionConf{Approval: hwconfig.ApprovalNever}
			clk := clockwork.NewRealClock()
			s, err := sim.New(cfg, sim.WithEpoch(clk.Now()))
			require.NoError(b, err)
			drv := inproc.New(s, inproc.Conf{Clock: clk, Logger: quietLogger()})
			require.NoError(b, drv.Start(context.Background()))
			b.Cleanup(func() { _ = drv.Close() })
			sent := make(chan time.Time, 64)
			sup, err := safety.New(safety.Conf{
				Config: cfg, Driver: drv, Clock: clk, Logger: quietLogger(),
				Observer: safety.ObserverFunc(func(e safety.Event) {
					if e.Kind == safety.EventCommandSent {
						select {
						case sent <- time.Now():
						default:
						}
					}
				}),
			})
			require.NoError(b, err)
			require.NoError(b, sup.Start(context.Background()))
			b.Cleanup(func() { _ = sup.Close() })
			conf := actions.RunnerConf{Config: cfg, Supervisor: sup, Clock: clk, Logger: quietLogger()}
			if durable {
				st, _ := openTest(b, b.TempDir(), func(c *Conf) { c.Clock = clk })
				conf.Recorder = st
			}
			r, err := actions.NewRunner(conf)
			require.NoError(b, err)
			b.Cleanup(func() { _ = r.Close(context.Background()) })
			ctx := context.Background()
			st, _ := conf.Recorder.(*Store)
			// Wait for the first robot state.
			for _, _, ok := sup.Latest(); !ok; _, _, ok = sup.Latest() {
				time.Sleep(time.Millisecond)
			}
			poses := []string{"ready", "stowed"}
			lat := make(latencies, 0, b.N)
			var commits0 int64
			if st != nil {
				commits0 = st.group.commits.Load()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t1 := time.Now()
				v, err := r.Submit(ctx, actions.Request{Tool: "move_arm_to", Arguments: map[string]any{"pose": poses[i%2]}, Principal: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				at := <-sent
				lat = append(lat, at.Sub(t1))
				b.StopTimer()
				if _, err := r.Cancel(ctx, v.ID, "bench"); err != nil {
					b.Fatal(err)
				}
				if v, _ = r.Wait(ctx, v.ID, 10*time.Second); !v.Terminal() {
					b.Fatalf("task %s still %s", v.ID, v.Status)
				}
				for len(sent) > 0 {
					<-sent
				}
				b.StartTimer()
			}
			b.StopTimer()
			lat.report(b, "submit-to-command-")
			lat.reportMS(b, "submit-to-command-")
			if st != nil {
				require.NoError(b, st.Sync(ctx))
				b.ReportMetric(float64(st.group.commits.Load()-commits0)/float64(b.N), "commits/cmd")
			}
		})
	}
}
