# timemachine — build, run and test targets. `make run` and `make test` are
# the two commands a fresh machine needs (README).

GO        ?= go
BIN       := bin/timemachine
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
PKGS      := ./...
STATICCHECK_VERSION ?= v0.6.1

export TIMEMACHINE_BIN := $(CURDIR)/$(BIN)

.PHONY: all build run test test-unit test-e2e lint fmt bench bench-go soak nemesis cluster clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/timemachine

# A single-node cluster with every default (HTTP on 127.0.0.1:8080, data in ./data).
run: build
	./$(BIN) server

# Unit, fuzz-corpus, FSM, storage-crash and in-process tests (with -race),
# then end-to-end tests of the real binary (real processes, kill -9).
# The short nemesis (internal/nemesis/runner, ~3 min, real processes) runs
# without -race: the race detector would only slow the harness down.
test: build
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 12m $$($(GO) list ./... | grep -v /e2e | grep -v /internal/nemesis/runner)
	$(GO) test -count=1 -timeout 12m ./e2e/...
	$(GO) test -count=1 -timeout 10m ./internal/nemesis/runner/

test-unit:
	$(GO) test -race -count=1 -timeout 12m $$($(GO) list ./... | grep -v /e2e | grep -v /internal/nemesis/runner)

test-e2e: build
	$(GO) test -count=1 -timeout 12m -v ./e2e/...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# Go micro-benchmarks (codec, storage, webhook client, HTTP handlers).
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The product benchmarks of docs/benchmarks.md: starts a server, runs
# `timemachine bench` scenarios against it, prints each report.
bench: build
	./scripts/bench.sh

# kill -9 / restart cycles against a running workload (long; not in `make test`).
soak: build
	./scripts/soak.sh

# The nemesis (docs/reliability.md): CYCLES (default 100) fault cycles
# against a cluster of NODES (3 or 5) real processes, then the history
# checkers; SEED replays a schedule, FAULTS picks faults, OUT keeps the files.
nemesis: build
	CYCLES=$(or $(CYCLES),100) NODES=$(or $(NODES),3) SEED=$(SEED) FAULTS=$(FAULTS) OUT=$(OUT) \
		MAX_HOLD=$(MAX_HOLD) NETWORK=$(NETWORK) ./scripts/nemesis.sh

# A local 3-node cluster on loopback (scripts/cluster.sh start|stop|status).
cluster: build
	./scripts/cluster.sh start

clean:
	rm -rf bin
