# Developer and CI entry points. `make test` is what CI runs (.ci/run).

GO ?= go
TEST_TIMEOUT ?= 20m

# Binaries installed with `go install` (the minio server for the tests) are
# found through PATH.
GOBIN_DIR := $(shell $(GO) env GOBIN)
GOPATH_BIN := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
export PATH := $(PATH):$(if $(GOBIN_DIR),$(GOBIN_DIR):)$(GOPATH_BIN)

.PHONY: all build test test-race test-short deps fmt fmt-check vet lab cross dist fuzz-short

all: build

## build: compile every package and command
build:
	$(GO) build ./...

## test: install missing test dependencies (MinIO in the background), check formatting, vet (also for Windows and linux/arm64), fuzz every target briefly, and run every test with the race detector; prints the time of each phase
# scripts/test.sh runs deps fmt-check vet in order, then test-race, with
# cross and fuzz-short in the background beside it, each as `make <phase>`.
# `make -n test` prints them.
test:
	MAKE='$(MAKE)' DRY_RUN='$(findstring n,$(firstword -$(MAKEFLAGS)))' scripts/test.sh

# The slowest test packages, longest first, so that go test starts them
# first and the short ones fill the end (it starts the packages in the order
# it is given them, TEST_P at a time); the rest follow from ./... . The order
# is that of one run's package times (scripts/testtimes.py, README); a
# pattern that matches nothing is only a warning.
SLOW_TESTS := ./cmd/edgeagent ./testkit/chaos/chaos300 ./cmd/edgecoord ./coordinator/sqlitestore \
	./testkit/chaos/schedules ./coordinator ./agent ./testkit/bench ./coordinator/api ./uploader \
	./testkit/chaos/planted ./capture ./testkit/securitytest ./coordinator/pgstore ./coordinator/ui \
	./testkit/fakeadbd ./testkit/chaos/effects ./coordinator/schedule/firing ./cmd/edgelab ./installer \
	./testkit/chaos ./testkit/chaos/cluster ./coordinator/mcp ./coordinator/session

# TEST_P: test packages (and compilations) go test runs at once: one more
# than the CPUs. The tests wait on servers, phones and timeouts much of
# the time: at go test's own default (the number of CPUs) a warm run kept
# the 2 cores 81 % busy, at one more 94 %, and test-race took 7m20s
# instead of 8m14s (README). At four (earlier versions, load average
# 12-15 with the background checks) each of four runs hit a
# load-sensitive test.
TEST_P ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))

# TEST_PARALLEL: tests of one package that run at once (their t.Parallel,
# go test's -parallel; its default is the number of CPUs). The parallel
# tests are those of the commands' end-to-end tests and the
# coordinator's, which wait on processes, servers and timeouts most of
# the time: cmd/edgeagent alone took 77 s at 2 and 58 s at 4 (2 cores,
# quiet). The packages still run TEST_P at a time.
TEST_PARALLEL ?= 4

# RACE: the race detector's build, for vet and the tests. -race also turns
# on checkptr, which checks every unsafe.Pointer conversion as it happens;
# in modernc.org's SQLite (C translated to Go, unsafe pointers throughout)
# those checks took 38% of the CPU of a SQLite store test, and
# coordinator/sqlitestore's tests ran in 41 s instead of 76 s without them
# (docs/benchmarks.md). They stay on for every other package, this
# module's included, and the race detector itself stays on everywhere.
# vet is given the same flags, so that the tests reuse its compilations.
RACE := -race -gcflags=modernc.org/...=-d=checkptr=0

# GORACE for the tests: a race-built program sleeps a second as it exits
# (ThreadSanitizer's atexit_sleep_ms, default 1000) so that other threads
# can finish printing a report. A test binary fails its test when the race
# detector saw a race during it (the testing package asks after every
# test), so the tests do without the second: four small packages took
# 4.8 s with it and 1.2 s without, and the suite runs 60 test binaries,
# and some tests start their test binary again as a helper.
GORACE ?= atexit_sleep_ms=0

# RACE_TEST: go test as test-race and test-short run it. The test binaries
# are linked without DWARF and symbol table (-s -w): a link takes a
# quarter less, and race reports and panics still name file and line
# (they read the binary's pclntab, which stays). -vet=off: make test and
# test-short run the vet target first, whose go vet runs every analyzer
# of go test's own vet step (a subset) over the same packages and their
# test files; go test's step would analyse every package and every
# dependency again, under other flags, so none of it would come from
# vet's cache.
RACE_TEST = GORACE='$(GORACE)' $(GO) test $(RACE) -vet=off -ldflags='-s -w' -count=1 -p $(TEST_P) -parallel $(TEST_PARALLEL)

# TEST_FLAGS: more go test flags for test-race, such as -json or -v.
TEST_FLAGS ?=

## test-race: run every test with the race detector (the last phase of make test)
test-race:
	$(RACE_TEST) $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) $(SLOW_TESTS) ./...

## test-short: like test without the dependency step, and with -short
test-short: fmt-check vet
	$(RACE_TEST) -short -timeout $(TEST_TIMEOUT) $(SLOW_TESTS) ./...

# DEPS: which parts scripts/test-deps.sh installs (system, minio); empty for both.
DEPS ?=

## deps: install the real servers the tests need (adb, PostgreSQL, MinIO, ...)
deps:
	scripts/test-deps.sh $(DEPS)

## fmt: format every Go file
fmt:
	gofmt -w .

## fmt-check: fail when a Go file is not gofmt-formatted
fmt-check:
	@out="$$(gofmt -l .)"; \
	if [ -n "$$out" ]; then \
		echo "gofmt: these files are not formatted (run make fmt):"; \
		echo "$$out"; \
		exit 1; \
	fi

## vet: run go vet, in the race detector's build
# $(RACE): vet compiles every package it checks and every one they import,
# and under $(RACE) those compilations are the ones test-race needs, so the
# tests reuse them instead of compiling the tree a second time. The only
# files -race leaves out are the !race half of uploader/race_*_test.go, a
# constant.
vet:
	$(GO) vet $(RACE) ./...

# Every fuzz target, as package:Target (`go test -fuzz` takes one target per
# run). testkit/securitytest checks that the list is complete.
FUZZ_TARGETS := \
	./protocol:FuzzDecodeMessages ./protocol:FuzzParseCoordSubject ./protocol/natsrpc:FuzzDecodeReply \
	./config:FuzzParseAgent ./config:FuzzParseCoordinator \
	./coordinator:FuzzHandlers ./coordinator/api:FuzzHandlers ./coordinator/session:FuzzSessionHandler \
	./fencing:FuzzSplitOwner ./fencing:FuzzFromMetadata ./fencing:FuzzToken \
	./capture/adb:FuzzDecodeScreencap ./capture/adb:FuzzParseDeviceList \
	./capture/adb:FuzzParseDeviceListLong ./capture/adb:FuzzParseShellOutput ./capture/adb:FuzzParseSync \
	./capture:FuzzParseFacts ./testkit/fakeadbd:FuzzReadMessage ./observe:FuzzRead ./uitree:FuzzParse ./uitree:FuzzSelector
# Two seconds per target with the default two workers: tens of thousands
# of inputs for the parsers in the cold run of README; the slowest target
# (coordinator FuzzHandlers, 437 a second in the long run of
# docs/security.md) may spend the two seconds on its baseline when the
# machine is loaded. The committed seeds of every target also run in go test.
FUZZTIME ?= 2s

# FUZZ_UNGUIDED: packages whose fuzzing test binary fuzz-short builds as
# the tests are built (the race detector's build, $(RACE)) instead of with
# the fuzzer's coverage instrumentation. Their tests link the NATS server,
# MinIO's client and pgx (and the coordinator's SQLite and Parquet), and the
# instrumented build of that graph cost some 300 CPU seconds of a cold make
# test, compiled for this step alone (docs/benchmarks.md); the race build
# is the one vet and test-race compile anyway, so these binaries cost a
# link each. Go fuzzes such a binary without coverage guidance (it says so
# in a warning): it mutates the seeds and the cached corpus at random,
# under the race detector. In the cold run of README that was 220 to 34,651
# inputs per target in its two seconds, and coordinator FuzzHandlers spent
# them on its seed corpus. Every other target is fuzzed with guidance. For
# a long run with guidance everywhere: make fuzz-short FUZZTIME=5m
# FUZZ_UNGUIDED= (docs/security.md).
FUZZ_UNGUIDED ?= ./protocol/natsrpc ./coordinator ./coordinator/api ./coordinator/session ./capture ./testkit/fakeadbd

## fuzz-short: run each fuzz target for FUZZTIME (default 2s) after its committed seed corpus
# Each package's fuzzing test binary is built once (go test -c with -fuzz,
# which builds it with the fuzzer's coverage instrumentation, or as the
# tests are built for FUZZ_UNGUIDED; -vet=off as in RACE_TEST) and run once
# per target in the package's directory, as go test -fuzz runs it, with go
# test's corpus cache ($GOCACHE/fuzz/<import path>): go test -fuzz takes
# one target per run and links the binary again each time.
# A run that fails with nothing but "context deadline exceeded" and writes no
# failing input is the fuzzing engine missing its own -fuzztime deadline
# under load (go.dev/issue/75804, fixed in Go 1.27); it is run again.
fuzz-short:
	@set -e; bins="$$(mktemp -d)"; trap 'rm -rf "$$bins"' EXIT; \
	fuzzcache="$$($(GO) env GOCACHE)/fuzz"; built=; \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; try=1; \
		if [ "$$pkg" != "$$built" ]; then \
			bin="$$bins/$$(echo "$$pkg" | tr -c 'a-zA-Z0-9\n' _).test"; \
			case " $(FUZZ_UNGUIDED) " in \
			*" $$pkg "*) build="$(RACE)";; \
			*) build="-fuzz .";; \
			esac; \
			echo "$(GO) test -c $$build -vet=off -o $$bin $$pkg"; \
			$(GO) test -c $$build -vet=off -o "$$bin" "$$pkg"; \
			info="$$($(GO) list -f '{{.Dir}} {{.ImportPath}}' "$$pkg")"; dir="$${info% *}"; imp="$${info##* }"; \
			built=$$pkg; \
		fi; \
		echo "(cd $$pkg && $$(basename "$$bin") -test.run '^$$' -test.fuzz '^$$fn$$' -test.fuzztime $(FUZZTIME))"; \
		until out="$$(cd "$$dir" && GORACE='$(GORACE)' "$$bin" -test.run '^$$' -test.fuzz "^$$fn\$$" -test.fuzztime $(FUZZTIME) \
				-test.fuzzcachedir "$$fuzzcache/$$imp" -test.timeout 10m 2>&1)"; do \
			echo "$$out"; \
			if [ $$try -ge 3 ] || echo "$$out" | grep -q 'Failing input written to' || \
				! echo "$$out" | grep -qx '    context deadline exceeded'; then exit 1; fi; \
			echo "(go.dev/issue/75804: the engine missed its deadline; running $$fn again)"; \
			try=$$((try + 1)); \
		done; \
		echo "$$out" | tail -n 3; \
	done

# The platforms beside linux/amd64 (which vet and the tests compile) that
# the release archives (make dist) are built for. The module has no file of
# its own per architecture, so linux/arm64 differs from linux/amd64 only in
# the standard library and the dependencies, and with CGO_ENABLED=0 in the
# build tags of the release:
#   windows/amd64  go build of the shipped commands (CROSS_PKGS), then go vet
#                  of every package they link, its Windows files as Windows
#                  compiles them (the package's files named one by one, so
#                  that its tests, which never run on Windows, and their
#                  dependencies are not compiled for it). The compilations
#                  are the ones the installer's and agent/power's Wine tests
#                  make, which link edgeagent.exe and run the power tests
#                  under Wine.
#   linux/arm64    testkit/typecheck: every package the shipped commands
#                  link, the standard library included, type-checked from
#                  source with the files linux/arm64 picks, as the
#                  compiler's front end checks them, without compiling
#                  (about 40 CPU seconds from an empty cache where go build
#                  took 161: docs/benchmarks.md). It misses only what the
#                  back end and the linker see (a dependency's assembly
#                  missing for arm64); make dist builds the archives.
CROSS_VET := windows/amd64
CROSS_TYPECHECK := linux/arm64
CROSS_PKGS := ./cmd/edgeagent ./cmd/edgecoord

## cross: build the shipped commands for windows/amd64 and vet the packages they link as Windows compiles them, and type-check them for linux/arm64
cross:
	@set -e; for target in $(CROSS_VET); do 		export GOOS=$${target%/*} GOARCH=$${target#*/} CGO_ENABLED=0; 		echo "GOOS=$$GOOS GOARCH=$$GOARCH CGO_ENABLED=0 $(GO) build -o /dev/null $(CROSS_PKGS)"; 		$(GO) build -o /dev/null $(CROSS_PKGS); 		pkgs="$$($(GO) list -deps -f '{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}' $(CROSS_PKGS))"; 		echo "GOOS=$$GOOS GOARCH=$$GOARCH CGO_ENABLED=0 $(GO) vet <the files of each package> ($$(echo $$pkgs | wc -w) packages)"; 		for pkg in $$pkgs; do 			$(GO) vet $$($(GO) list -f '{{range .GoFiles}}{{$$.Dir}}/{{.}} {{end}}' $$pkg) || { echo "go vet for $$GOOS/$$GOARCH: $$pkg"; exit 1; }; 		done; 	done; 	unset GOOS GOARCH; for target in $(CROSS_TYPECHECK); do 		echo "$(GO) run ./testkit/typecheck -os $${target%/*} -arch $${target#*/} $(CROSS_PKGS)"; 		$(GO) run ./testkit/typecheck -os $${target%/*} -arch $${target#*/} $(CROSS_PKGS); 	done

# The release version: the latest v* tag, or v0.0.0-dev without one.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null || echo v0.0.0-dev)

## dist: build the release archives (linux amd64/arm64 .tar.gz, windows amd64 .zip) and the .deb packages into dist/
dist:
	VERSION=$(VERSION) GO=$(GO) packaging/dist.sh

## lab: run the whole system in one process on embedded defaults
lab:
	$(GO) run ./cmd/edgelab $(ARGS)
