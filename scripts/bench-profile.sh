#!/usr/bin/env bash
# `make bench-profile`: where the time of the approved-command path goes.
# Runs BenchmarkROS_ApprovedCommandLatency/grant twice — once with a CPU profile,
# once with an execution trace (the trace slows the path, so its figures
# are read as proportions) — then prints
#   - the CPU per command of the stages of the path (go tool pprof),
#   - the critical path of each sample cut into segments and goroutine
#     states, and the fsyncs before each goal (scripts/bench-trace.py on
#     `go tool trace -d=parsed`).
# Files go to $OUT_DIR (default test-output/bench/profile): bridge.test,
# cpu.out, trace.out (open with `go tool trace`), and the two reports.
#
# Variables: N (samples per run, default 1500 for the profile; the trace
# run takes N/4), OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
N=${N:-1500}
OUT_DIR=${OUT_DIR:-test-output/bench/profile}
mkdir -p "$OUT_DIR"
out=$(cd "$OUT_DIR" && pwd)
command -v python3 >/dev/null || { echo "bench-profile: needs python3" >&2; exit 2; }

"$GO" test -c -o "$out/bridge.test" ./bridge
run() { (cd bridge && "$out/bridge.test" -test.run '^$' -test.bench '^BenchmarkROS_ApprovedCommandLatency$/^grant$' -test.benchmem "$@"); }

echo "bench-profile: $N samples with a CPU profile" >&2
run -test.benchtime "${N}x" -test.cpuprofile "$out/cpu.out" | tee "$out/cpu-run.txt"
trace_n=$((N / 4))
echo "bench-profile: $trace_n samples with an execution trace" >&2
run -test.benchtime "${trace_n}x" -test.trace "$out/trace.out" | tee "$out/trace-run.txt"

# CPU per command: cumulative seconds of a function / samples. The first
# b.N=1 round adds one sample.
samples=$((N + 1))
"$GO" tool pprof -top -cum -nodefraction=0 -nodecount=100000 "$out/bridge.test" "$out/cpu.out" 2>/dev/null >"$out/cpu-top.txt"
{
	echo "CPU per command (µs; cumulative, all goroutines, $samples samples; includes the task's end after the goal)"
	for f in \
		'net/http.(*conn).serve' 'toolapi.(*Server).handleCall' 'toolapi.decodeCallBody' 'toolapi.decodeArguments' \
		'toolapi.(*Tool).Validate' 'toolapi.(*Server).runAction' 'actions.(*Runner).submit' 'actions.(*planner).plan' \
		'safety.(*Supervisor).CheckLimits' 'fsm.New' 'toolapi.(*Server).follow' 'toolapi.writeJSON' \
		'actions.(*Runner).fire' 'store.(*Store).RecordTransition' 'store.(*Store).writeBatch' 'store.(*Store).tx1' \
		'database/sql.(*DB).begin' 'modernc.org/sqlite.(*conn).prepareV2' 'database/sql.(*Tx).Commit' \
		'modernc.org/libc.Xfsync' 'modernc.org/libc.Xpwrite' \
		'safety.(*Supervisor).sendLocked' 'safety.(*Supervisor).admit' 'transport/ros.(*Driver).Send' \
		'goroslib/v2.(*Publisher).run' 'prototcp.(*Conn).WriteMessage' 'runtime.gcBgMarkWorker'; do
		awk -v f="$f" -v n="$samples" '
			function sec(v) { if (v ~ /ms$/) return substr(v, 1, length(v) - 2) / 1000; if (v ~ /s$/) return substr(v, 1, length(v) - 1) + 0; return v + 0 }
			index($0, f) && NF >= 6 { c = sec($4); if (c > best) best = c }
			END { printf "  %-45s %9.1f\n", f, best / n * 1e6 }' "$out/cpu-top.txt"
	done
} | tee "$out/cpu-report.txt"

echo
"$GO" tool trace -d=parsed "$out/trace.out" 2>/dev/null | python3 scripts/bench-trace.py 1 | tee "$out/trace-report.txt"
echo
echo "bench-profile: files in $OUT_DIR (go tool trace $OUT_DIR/trace.out; go tool pprof -http=: $OUT_DIR/bridge.test $OUT_DIR/cpu.out)" >&2
