#!/usr/bin/env bash
# `make bench`: runs the benchmarks one package at a time (-p 1, so no two
# benchmark binaries share the two cores), tees the raw `go test -bench`
# output — the benchstat format, headers included — to $OUT, then prints
# the performance targets of issue 19 from it (internal/benchreport):
# each figure beside the baseline measured in the same run, the ratio,
# the bound and PASS/MISS.
#
# Variables (all optional):
#   BENCH      benchmark regex (default "." — every benchmark)
#   PKGS       packages (default ./...)
#   BENCHTIME  -benchtime (default 1s)
#   COUNT      -count (default 1; the report takes medians)
#   OUT        raw output file (default test-output/bench/bench.txt)
#   BENCH_TIMEOUT  go test -timeout per package (default 90m)
#   STRICT=1   exit 1 when a target is MISS or MISSING
#   ALL_TARGETS=1  report every target even with a narrowed BENCH/PKGS
#              (make bench-targets)
#
# The exit status is go test's (a failed or missing benchmark fails the
# run); a MISS only with STRICT=1: the machine is shared, the figures
# inform.
set -uo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
BENCH=${BENCH:-.}
PKGS=${PKGS:-./...}
BENCHTIME=${BENCHTIME:-1s}
COUNT=${COUNT:-1}
OUT=${OUT:-test-output/bench/bench.txt}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-90m}

mkdir -p "$(dirname "$OUT")"
start=$(date +%s)
echo "bench: go test -p 1 -run '^\$' -bench '$BENCH' -benchmem -benchtime $BENCHTIME -count $COUNT $PKGS > $OUT" >&2
# Only standard output goes to the file: go's own messages on standard
# error ("go: downloading …") would read as configuration lines to
# benchstat.
# shellcheck disable=SC2086 # PKGS is a list
"$GO" test -p 1 -run '^$' -bench "$BENCH" -benchmem -benchtime "$BENCHTIME" -count "$COUNT" \
	-timeout "$BENCH_TIMEOUT" $PKGS | tee "$OUT"
rc=${PIPESTATUS[0]}
echo >&2
echo "bench: $(($(date +%s) - start)) s; raw results (benchstat format) in $OUT" >&2
echo

flags=()
if [ "${STRICT:-}" = 1 ]; then flags+=(-strict); fi
# A narrowed selection reports only the targets it ran (make bench-targets
# runs them all: ALL_TARGETS=1 keeps a missing one in the report).
if [ "${ALL_TARGETS:-}" != 1 ] && { [ "$BENCH" != . ] || [ "$PKGS" != ./... ]; }; then flags+=(-present); fi
"$GO" run ./internal/benchreport "${flags[@]}" "$OUT"
report=$?
if [ "$rc" -ne 0 ]; then
	echo "bench: go test failed (exit $rc): see the FAIL lines in $OUT" >&2
	exit "$rc"
fi
exit "$report"
