# crew: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin/crew
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: all build demo test vet lint fuzz bench powerloss linearizability nats-auth clean

all: build

# A static binary without urfave/cli's man-page generator: each crew
# command is its own short process, and these halve its start-up time
# (no dynamic loader, no markdown package to initialise).
BUILDTAGS  := urfave_cli_no_docs
BUILDFLAGS := -ldflags "-X main.version=$(VERSION)" -tags $(BUILDTAGS)

# bin/crew is the lite build (-tags crew_lite: no NATS client, no MCP
# SDK to load on each start); it hands crew mcp and --store commands to
# bin/crew-full, the build with everything (cmd/crew/crew_lite.go).
build:
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS) -o $(BIN)-full ./cmd/crew
	CGO_ENABLED=0 $(GO) build $(BUILDFLAGS),crew_lite -o $(BIN) ./cmd/crew

# A leader and three real worker processes coordinate a run on the Go
# module in testdata/demo, in a fresh temporary directory.
demo: build
	./scripts/demo.sh $(abspath $(BIN))

vet:
	$(GO) vet ./...

# staticcheck, pinned in go.mod as a tool (go get -tool): unused code,
# misnamed errors, suspicious constructs.
lint:
	$(GO) tool staticcheck ./...

# -timeout: the guarantee package (its 100 power cuts included) takes
# minutes, near go test's default 10 on a loaded 2-core machine.
# -p 1: one package at a time. The power-loss suite's LazyFS daemon died
# mid-cut ("transport endpoint is not connected") in two of four runs
# with the other packages' crew processes beside it on 2 cores, and in
# none of nine runs alone.
test: vet lint
	$(GO) test -count=1 -p 1 -timeout 30m ./...

# The power-loss suite alone, longer: POWERLOSS_CUTS power cuts (make test
# makes 100) of state roots on LazyFS, a FUSE file system that loses every
# write not fsynced (guarantee/powerloss_test.go). Needs root, /dev/fuse
# and LazyFS: CREW_LAZYFS, by default the one .ci/run builds and caches in
# LAZYFS_CACHE; the suite skips, saying why, without them.
POWERLOSS_CUTS ?= 1000
LAZYFS_CACHE   ?= $(HOME)/.cache/crew-lazyfs
CREW_LAZYFS    ?= $(wildcard $(LAZYFS_CACHE)/lazyfs/build/lazyfs)
powerloss:
	CREW_LAZYFS=$(CREW_LAZYFS) CREW_POWERLOSS_CUTS=$(POWERLOSS_CUTS) \
		$(GO) test -count=1 -v -timeout 0 -run '^TestPowerLoss$$' ./guarantee/

# The linearizability checks alone, longer: LINEARIZABILITY_OPS operations
# per store (make test records 10,000 on each: the file store and the
# NATS cluster), checked by porcupine (guarantee/linearizable_test.go).
LINEARIZABILITY_OPS ?= 20000
linearizability:
	CREW_LINEARIZABILITY_OPS=$(LINEARIZABILITY_OPS) \
		$(GO) test -count=1 -v -timeout 0 -run '^TestLineariz' ./guarantee/

# The NATS suites with authorization on (docs/nats.md, Authorization):
# the conformance suites and the CLI testscripts on a server started from
# crew nats auth's configuration (CREW_TEST_NATS_AUTH). make test runs
# nats_auth.txtar and TestLinearizableNATSAuth, which use per-agent
# credentials, already.
nats-auth:
	CREW_TEST_NATS_AUTH=1 $(GO) test -count=1 -p 1 -timeout 30m \
		-run 'TestConformance|TestScriptNATS$$|TestLinearizableNATSAuth' ./store/storetest ./run/runtest ./cmd/crew ./guarantee

# Every go test -fuzz target, one after another (go test -fuzz takes one
# target per run), FUZZTIME each. `make test` runs only their seed corpora
# (testdata/fuzz/<target>/); a failing input found here is written there,
# so it becomes a regression test.
FUZZTIME ?= 30s
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | sed 's/^func //'); do \
			echo "== $$dir $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done

# Performance (README.md, "Performance"): the raw limit of this disk and the product, in the
# same run, in a temporary directory (BENCHDIR, default $$TMPDIR); prints a
# table and, last, one JSON line. BENCHFLAGS=-quick for a short look.
BENCHDIR   ?=
BENCHFLAGS ?=
bench: build
	$(GO) run ./cmd/crewbench -crew $(BIN) $(if $(BENCHDIR),-dir $(BENCHDIR)) $(BENCHFLAGS)

clean:
	rm -rf bin
