# timemachine — build, run and test targets. `make run` and `make test` are
# the two commands a fresh machine needs (README).

GO        ?= go
BIN       := bin/timemachine
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
PKGS      := ./...
STATICCHECK_VERSION ?= v0.6.1
# go test, with a summary of why at the end of its output when it fails
# (the hung tests of a timeout): CI shows only the tail.
GOTEST    := GO=$(GO) ./scripts/gotest.sh

export TIMEMACHINE_BIN := $(CURDIR)/$(BIN)

.PHONY: all build run test test-unit test-e2e test-ui openapi lint lint-deploy fmt bench bench-go vs-asynq soak nemesis nemesis-short cluster clean release scale

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/timemachine

# Static, reproducible binaries for linux and darwin on amd64 and arm64 as
# dist/timemachine-$(VERSION)-<os>-<arch>.tar.gz plus dist/SHA256SUMS
# (docs/operations.md, "Packaging and deployment").
release:
	VERSION=$(VERSION) GO=$(GO) ./scripts/release.sh

# A single-node cluster with every default (HTTP on 127.0.0.1:8080, data in ./data).
run: build
	./$(BIN) server

# The in-process load tests (node/ops_test.go, *UnderLoad) count every
# callback a steady load receives through scale-out, drain, transfer and
# hand-off, and fail on a duplicate after a planned move. Under -race on a
# shared machine every in-process node stalls together now and then past
# the 300 ms heartbeat timeout; the unplanned elections that follow may
# repeat callbacks (allowed, as after a crash) and hide what the tests are
# for. They run in a step of their own without -race; everything else,
# their helpers included, keeps -race.
LOADTESTS := UnderLoad$$

# Unit, fuzz-corpus, FSM, storage-crash and in-process tests (with -race),
# then end-to-end tests of the real binary (real processes, kill -9), with
# the console's browser test when Chromium is installed (TIMEMACHINE_UI=auto;
# ~25 s; make test-ui runs it alone and refreshes the screenshots).
test: build lint-deploy
	$(GO) vet $(PKGS)
	cd tools/vsasynq && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(GOTEST) -race -count=1 -timeout 12m -skip '$(LOADTESTS)' $$($(GO) list ./... | grep -v /e2e | grep -v /internal/nemesis/runner)
	$(GOTEST) -count=1 -timeout 12m -run '$(LOADTESTS)' ./node/
	TIMEMACHINE_UI=auto $(GOTEST) -count=1 -timeout 12m ./e2e/...
	$(GOTEST) -count=1 -timeout 10m ./internal/nemesis/runner/

# The short nemesis alone (~85 s, 14 cycles of faults on real processes in
# network namespaces, every history checker; docs/reliability.md). Part of
# `make test`.
nemesis-short: build
	$(GOTEST) -count=1 -timeout 10m ./internal/nemesis/runner/

test-unit:
	$(GOTEST) -race -count=1 -timeout 12m -skip '$(LOADTESTS)' $$($(GO) list ./... | grep -v /e2e | grep -v /internal/nemesis/runner)
	$(GOTEST) -count=1 -timeout 12m -run '$(LOADTESTS)' ./node/

test-e2e: build
	$(GOTEST) -count=1 -timeout 12m -v ./e2e/...

# The web console in headless Chromium (Debian's chromium package, which
# .ci/run installs) against a 3-node cluster: every page, the token
# prompt, create → fire → dead letter → redrive; screenshots into docs/img.
test-ui: build
	TIMEMACHINE_UI=1 TIMEMACHINE_UI_SHOTS=$(CURDIR)/docs/img $(GO) test -count=1 -timeout 5m -run '^TestConsole$$' -v ./e2e/

# docs/openapi.json is a copy of the embedded OpenAPI document.
openapi:
	cp rpc/openapi/openapi.json docs/openapi.json

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)
	cd tools/deploylint && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd tools/vsasynq && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(MAKE) --no-print-directory lint-deploy

# Dockerfile, .dockerignore, deploy/compose.yaml and deploy/timemachine.service
# checked without Docker (tools/deploylint, a module of its own): BuildKit's
# build checks, hadolint-style rules, compose-go's loader, systemd-analyze.
lint-deploy:
	cd tools/deploylint && $(GO) test -count=1 ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# Go micro-benchmarks (codec, storage, webhook client, HTTP handlers).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The product benchmarks of docs/benchmarks.md: starts a server, runs
# `timemachine bench` scenarios against it, prints each report.
bench: build
	./scripts/bench.sh

# Issue 13's side by side: asynq + Redis (AOF everysec) and a fresh
# timemachine server, same workloads, one table (tools/vsasynq, its own
# module; INSTALL=1 apt-get installs redis-server when missing). Not in
# `make test`. VS_ASYNQ=timers adds the timer workloads.
VS_ASYNQ ?= create
vs-asynq: build
	./scripts/vs-asynq.sh $(VS_ASYNQ)

# kill -9 / restart cycles against a running workload (long; not in `make test`).
soak: build
	./scripts/soak.sh

# The nemesis (docs/reliability.md): CYCLES (default 100) fault cycles
# against a cluster of NODES (3 or 5) real processes, then the history
# checkers; SEED replays a schedule, FAULTS picks faults, OUT keeps the files.
nemesis: build
	CYCLES=$(or $(CYCLES),100) NODES=$(or $(NODES),3) SEED=$(SEED) FAULTS=$(FAULTS) OUT=$(OUT) \
		MAX_HOLD=$(MAX_HOLD) NETWORK=$(NETWORK) RAFT_LOG_LEVEL=$(RAFT_LOG_LEVEL) ./scripts/nemesis.sh

# A local 3-node cluster on loopback (scripts/cluster.sh start|stop|status).
# Scale out 3 → 5 nodes and back to 3 under a steady create+fire load
# (~1 min; fails on any lost, duplicate or early callback; docs/operations.md).
scale: build
	./scripts/scale.sh

cluster: build
	./scripts/cluster.sh start

clean:
	rm -rf bin dist
