# robot-bridge — `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
CONFIG ?= hw-configs/sim-mobile-manipulator.yaml
LISTEN ?= 127.0.0.1:8080
DATA_DIR ?= ./var
GOLANGCI_LINT_VERSION ?= v2.15.0
FUZZTIME ?= 10s
BENCHTIME ?= 1s
# make bench / bench-compare: benchmark regex, packages, runs.
BENCH ?= .
PKGS ?= ./...
COUNT ?= 1
# bench-compare runs COUNT times each side when COUNT is given, else 5.
BENCH_COMPARE_COUNT = $(if $(filter command line environment,$(origin COUNT)),$(COUNT),5)
CRASH_ITERATIONS ?= 200
CRASH_SEED ?=
# Debian packages the integration tests meet for real: a ROS master and
# peers, an MQTT broker and clients, a browser for the console, promtool.
TEST_DEBS := ros-core python3-rospy python3-actionlib python3-actionlib-msgs python3-move-base-msgs python3-nav-msgs python3-sensor-msgs python3-geometry-msgs python3-std-msgs python3-trajectory-msgs mosquitto mosquitto-clients chromium prometheus postgresql

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/robot-bridge
	$(GO) build -o bin/robot-bridge ./cmd/robot-bridge

.PHONY: run
run: ## run the bridge on the embedded simulator (API, console, metrics on $(LISTEN))
	$(GO) run ./cmd/robot-bridge serve --config $(CONFIG) --listen $(LISTEN) --data-dir $(DATA_DIR)

.PHONY: test-deps
test-deps: ## install the Debian and npm packages the tests need, when missing
	@./scripts/test-deps.sh $(TEST_DEBS)
	@./scripts/test-npm.sh

.PHONY: test
test: test-deps ## go vet + go test -race ./... (installs test packages first)
	$(GO) vet ./...
	$(GO) test -race -timeout 25m ./...
	@# Allocation counts are only meaningful without the race detector.
	$(GO) test -count=1 -run 'NoAllocations' ./toolapi

.PHONY: lint
lint: ## golangci-lint (pinned) + go mod tidy -diff
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...
	$(GO) mod tidy -diff

.PHONY: bench
bench: test-deps ## run every benchmark, one package at a time (BENCH=regex, PKGS, COUNT, BENCHTIME; ~30 min); raw results to test-output/bench/bench.txt, then each target vs its same-run baseline
	GO=$(GO) BENCH='$(BENCH)' PKGS='$(PKGS)' BENCHTIME=$(BENCHTIME) COUNT=$(COUNT) ./scripts/bench.sh

# The benchmarks behind the targets of issue 19 (what bench-targets runs).
BENCH_TARGETS := ^(BenchmarkROS_ApprovedCommandLatency|BenchmarkROS_ApprovedCommandStages|BenchmarkROS_StopLatency|BenchmarkToolCallAllocs|BenchmarkGetRobotState_HTTPvsBare|BenchmarkTransitionWrite|BenchmarkIdleRSS)$$
BENCH_TARGET_PKGS := ./bridge ./toolapi ./store ./internal/benchreport

.PHONY: bench-targets
bench-targets: test-deps ## only the benchmarks behind the issue-19 targets (~1 min), same output as bench
	GO=$(GO) BENCH='$(BENCH_TARGETS)' PKGS='$(BENCH_TARGET_PKGS)' BENCHTIME=$(BENCHTIME) COUNT=$(COUNT) ALL_TARGETS=1 ./scripts/bench.sh

.PHONY: bench-profile
bench-profile: test-deps ## CPU profile and execution trace of the approved-command path (BenchmarkROS_ApprovedCommandLatency), cut into stages; files in test-output/bench/profile
	GO=$(GO) ./scripts/bench-profile.sh

.PHONY: bench-report
bench-report: ## print the targets again from test-output/bench/bench.txt (or FILE=...)
	$(GO) run ./internal/benchreport $(or $(FILE),test-output/bench/bench.txt)

.PHONY: bench-compare
bench-compare: test-deps ## compare the working tree with BASE=<git ref> by benchstat (COUNT=5 runs each, interleaved; BENCH=regex or BENCH=targets, PKGS to narrow)
	GO=$(GO) BASE='$(BASE)' BENCHTIME=$(BENCHTIME) COUNT=$(BENCH_COMPARE_COUNT) \
	  BENCH='$(if $(filter targets,$(BENCH)),$(BENCH_TARGETS),$(BENCH))' \
	  PKGS='$(if $(filter targets,$(BENCH)),$(BENCH_TARGET_PKGS),$(PKGS))' ./scripts/bench-compare.sh

.PHONY: crash-loop
crash-loop: ## kill -9 the real binary at random points CRASH_ITERATIONS times (default 200; CRASH_SEED replays) and check nothing is lost
	ROBOT_BRIDGE_CRASH_ITERATIONS=$(CRASH_ITERATIONS) ROBOT_BRIDGE_CRASH_SEED=$(CRASH_SEED) \
	  $(GO) test -run '^TestCrash_KillNineLosesNothing$$' -count=1 -v -timeout 60m ./cmd/robot-bridge

.PHONY: conformance
conformance: ## the safety conformance suite: every attack case x seeds 1,2,3 x the in-process simulator and ROS, chaos on; writes docs/conformance/report.md
	ROBOT_BRIDGE_CONFORMANCE=full $(GO) test -run '^TestConformance_Full$$' -count=1 -v -timeout 60m ./conformance

.PHONY: fuzz-short
fuzz-short: ## run every fuzz target for $(FUZZTIME)
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

.PHONY: schema
schema: ## regenerate hw-configs/hwconfig.schema.json (the hw-config's JSON Schema for editors) from the Go types
	$(GO) generate ./hw-configs/

.PHONY: diagram
diagram: ## regenerate the task lifecycle diagram in ARCHITECTURE.md from the fsm table
	$(GO) run ./cmd/robot-bridge lifecycle --write ARCHITECTURE.md

# Protobuf codegen: buf and both plugins come from the Go module proxy via
# `go run` (the plugins at the versions go.mod pins; see proto/buf.gen.yaml).
BUF_VERSION ?= v1.75.0
BUF := $(GO) run github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
PROTO_SUMS := gen/robotbridge/v1/SOURCES.sha256

.PHONY: proto
proto: ## lint proto/, regenerate gen/ (Go + connect) and record the checksums the freshness test checks
	$(BUF) lint proto
	$(BUF) generate --template proto/buf.gen.yaml
	LC_ALL=C sha256sum $$(find proto -type f \( -name '*.proto' -o -name 'buf*.yaml' \) | LC_ALL=C sort) \
	  $$(find gen -type f -name '*.go' | LC_ALL=C sort) > $(PROTO_SUMS)

.PHONY: proto-check
proto-check: ## regenerate into a temp dir and fail if the committed gen/ differs
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  $(BUF) generate --template proto/buf.gen.yaml -o "$$tmp" && \
	  diff -r -x '*.sha256' "$$tmp/gen" gen && echo "gen/ is up to date"

.PHONY: clean
clean: ## remove build output and the default data dir
	rm -rf bin var
