#!/usr/bin/env bash
# `make bench-compare BASE=<git ref>`: compares the working tree against
# BASE with benchstat. It checks BASE out in a temporary git worktree,
# builds the test binaries of both trees once, then runs the same
# benchmark selection COUNT times on each, alternating base and head run
# by run (base, head, base, head, …) and one package at a time, so a
# change in the machine's load falls on both sides alike. The raw results
# (benchstat format) go to $OUT_DIR/base.txt and $OUT_DIR/head.txt, then
#
#   go run golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION base=… head=…
#
# prints the comparison, and internal/benchreport the targets the selection
# covers: base figure, head figure, change, and the head's verdict.
#
# Variables:
#   BASE       git ref to compare against (required)
#   BENCH      benchmark regex (default "."), e.g. BENCH=ROS_ApprovedCommandLatency
#   PKGS       packages (default ./...; narrow it with BENCH for a quick look,
#              e.g. PKGS=./bridge)
#   COUNT      runs per side (default 5; benchstat wants ≥ 5, better 10)
#   BENCHTIME  -benchtime (default 1s)
#   OUT_DIR    where base.txt and head.txt go (default test-output/bench)
#   BENCH_TIMEOUT  -test.timeout per package and run (default 60m)
set -euo pipefail
cd "$(dirname "$0")/.."

BASE=${BASE:-}
if [ -z "$BASE" ]; then
	echo "usage: make bench-compare BASE=<git ref> [BENCH=regex] [PKGS=./...] [COUNT=5] [BENCHTIME=1s]" >&2
	exit 2
fi
GO=${GO:-go}
BENCH=${BENCH:-.}
PKGS=${PKGS:-./...}
COUNT=${COUNT:-5}
BENCHTIME=${BENCHTIME:-1s}
OUT_DIR=${OUT_DIR:-test-output/bench}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-60m}
BENCHSTAT_VERSION=${BENCHSTAT_VERSION:-v0.0.0-20260908200009-22c9c6c9d4da}

root=$(pwd)
base_sha=$(git rev-parse --verify --quiet "$BASE^{commit}") || {
	echo "bench-compare: $BASE is not a commit of this repository" >&2
	exit 2
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-compare.XXXXXX")
cleanup() {
	git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true
	rm -rf "$tmp"
	git -C "$root" worktree prune >/dev/null 2>&1 || true
}
trap cleanup EXIT
git worktree add --quiet --detach "$tmp/base" "$base_sha"
# Ignored files the benchmarks need (the npm packages of testdata) are
# not in a fresh checkout: lend it the working tree's.
while IFS= read -r nm; do
	if [ ! -e "$tmp/base/$nm" ] && [ -d "$tmp/base/$(dirname "$nm")" ]; then
		ln -s "$root/$nm" "$tmp/base/$nm"
	fi
done < <(find testdata -maxdepth 3 -type d -name node_modules -prune 2>/dev/null)

mkdir -p "$OUT_DIR"
base_txt="$OUT_DIR/base.txt"
head_txt="$OUT_DIR/head.txt"
: >"$base_txt"
: >"$head_txt"

# build <tree> <bindir>: one test binary per package with tests, and a
# list of "binary<TAB>package dir" to run them from.
build() {
	local tree=$1 bins=$2
	mkdir -p "$bins"
	: >"$bins/list"
	# A package the tree does not have (yet) is skipped, and said.
	# shellcheck disable=SC2086 # PKGS is a list
	(cd "$tree" && "$GO" list -e -f '{{if .Error}}missing{{"\t"}}{{.ImportPath}}{{else if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{"\t"}}{{.Dir}}{{end}}' $PKGS) |
		while IFS=$'\t' read -r pkg dir; do
			[ -n "$pkg" ] || continue
			if [ "$pkg" = missing ]; then
				echo "bench-compare: $tree has no package $dir; skipped there" >&2
				continue
			fi
			bin="$bins/$(echo "$pkg" | tr '/.' '__').test"
			if ! (cd "$tree" && "$GO" test -c -o "$bin" "$pkg"); then
				echo "bench-compare: $pkg does not build in $tree; skipped there" >&2
				continue
			fi
			printf '%s\t%s\n' "$bin" "$dir" >>"$bins/list"
		done
}

# run <bindir> <out>: one run of the selection, package by package.
run() {
	local bins=$1 out=$2 status=0
	while IFS=$'\t' read -r bin dir; do
		(cd "$dir" && "$bin" -test.run '^$' -test.bench "$BENCH" -test.benchmem \
			-test.benchtime "$BENCHTIME" -test.count 1 -test.timeout "$BENCH_TIMEOUT") >>"$out" || status=1
	done <"$bins/list"
	return $status
}

echo "bench-compare: building the test binaries of $BASE (${base_sha:0:12}) and of the working tree" >&2
build "$tmp/base" "$tmp/bin-base"
build "$root" "$tmp/bin-head"

failed=0
start=$(date +%s)
for i in $(seq 1 "$COUNT"); do
	echo "bench-compare: run $i/$COUNT: base" >&2
	run "$tmp/bin-base" "$base_txt" || failed=1
	echo "bench-compare: run $i/$COUNT: head" >&2
	run "$tmp/bin-head" "$head_txt" || failed=1
done
echo "bench-compare: $(($(date +%s) - start)) s; raw results in $base_txt and $head_txt" >&2
echo

"$GO" run "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION" "base=$base_txt" "head=$head_txt"
echo
"$GO" run ./internal/benchreport -present -base "$base_txt" "$head_txt" || true
if [ "$failed" -ne 0 ]; then
	echo "bench-compare: a benchmark failed (see FAIL in $base_txt / $head_txt)" >&2
	exit 1
fi
