# Developer and CI entry points. `make test` is what CI runs (.ci/run).

GO ?= go
TEST_TIMEOUT ?= 20m

# Binaries installed with `go install` (the minio server for the tests) are
# found through PATH.
GOBIN_DIR := $(shell $(GO) env GOBIN)
GOPATH_BIN := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
export PATH := $(PATH):$(if $(GOBIN_DIR),$(GOBIN_DIR):)$(GOPATH_BIN)

.PHONY: all build test test-short deps fmt fmt-check vet lab cross dist fuzz-short

all: build

## build: compile every package and command
build:
	$(GO) build ./...

## test: install missing test dependencies, check formatting, vet, cross-compile, and run every test with the race detector
test: deps fmt-check vet cross fuzz-short
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

## test-short: like test without the dependency step, and with -short
test-short: fmt-check vet
	$(GO) test -race -count=1 -short -timeout $(TEST_TIMEOUT) ./...

## deps: install the real servers the tests need (adb, PostgreSQL, MinIO)
deps:
	scripts/test-deps.sh

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

## vet: run go vet
vet:
	$(GO) vet ./...

# Every fuzz target, as package:Target (`go test -fuzz` takes one target per
# run). testkit/securitytest checks that the list is complete.
FUZZ_TARGETS := \
	./protocol:FuzzDecodeMessages ./protocol:FuzzParseCoordSubject ./protocol/natsrpc:FuzzDecodeReply \
	./config:FuzzParseAgent ./config:FuzzParseCoordinator \
	./coordinator:FuzzHandlers ./coordinator/api:FuzzHandlers ./coordinator/session:FuzzSessionHandler ./coordinator/mcp:FuzzParseElements \
	./fencing:FuzzSplitOwner ./fencing:FuzzFromMetadata ./fencing:FuzzToken \
	./capture/adb:FuzzDecodeScreencap ./capture/adb:FuzzParseDeviceList \
	./capture/adb:FuzzParseDeviceListLong ./capture/adb:FuzzParseShellOutput ./capture/adb:FuzzParseSync \
	./capture:FuzzParseFacts ./testkit/fakeadbd:FuzzReadMessage
FUZZTIME ?= 4s

## fuzz-short: run each fuzz target for FUZZTIME (default 4s) after its committed seed corpus
# A run that fails with nothing but "context deadline exceeded" and writes no
# failing input is the fuzzing engine missing its own -fuzztime deadline
# under load (go.dev/issue/75804, fixed in Go 1.27); it is run again.
fuzz-short:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t#*:}; try=1; \
		echo "$(GO) test -run '^$$' -fuzz '^$$fn$$' -fuzztime $(FUZZTIME) $$pkg"; \
		until out="$$($(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1)"; do \
			echo "$$out"; \
			if [ $$try -ge 3 ] || echo "$$out" | grep -q 'Failing input written to' || \
				! echo "$$out" | grep -qx '    context deadline exceeded'; then exit 1; fi; \
			echo "(go.dev/issue/75804: the engine missed its deadline; running $$fn again)"; \
			try=$$((try + 1)); \
		done; \
		echo "$$out" | tail -n 3; \
	done

# Platforms every package must build for; the release archives are built
# for the same ones.
CROSS_TARGETS := windows/amd64 linux/amd64 linux/arm64

## cross: compile every package for windows/amd64, linux/amd64 and linux/arm64, and vet the Windows build with its tests
cross:
	@set -e; for target in $(CROSS_TARGETS); do \
		echo "GOOS=$${target%/*} GOARCH=$${target#*/} $(GO) build ./..."; \
		GOOS=$${target%/*} GOARCH=$${target#*/} CGO_ENABLED=0 $(GO) build ./...; \
	done
	GOOS=windows $(GO) vet ./...

# The release version: the latest v* tag, or v0.0.0-dev without one.
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' 2>/dev/null || echo v0.0.0-dev)

## dist: build the release archives (linux amd64/arm64 .tar.gz, windows amd64 .zip) and the .deb packages into dist/
dist:
	VERSION=$(VERSION) GO=$(GO) packaging/dist.sh

## lab: run the whole system in one process on embedded defaults
lab:
	$(GO) run ./cmd/edgelab $(ARGS)
