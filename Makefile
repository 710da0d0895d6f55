# Developer and CI entry points. `make test` is what CI runs (.ci/run).

GO ?= go
TEST_TIMEOUT ?= 20m

# Binaries installed with `go install` (the minio server for the tests) are
# found through PATH.
GOBIN_DIR := $(shell $(GO) env GOBIN)
GOPATH_BIN := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
export PATH := $(PATH):$(if $(GOBIN_DIR),$(GOBIN_DIR):)$(GOPATH_BIN)

.PHONY: all build test test-short deps fmt fmt-check vet lab

all: build

## build: compile every package and command
build:
	$(GO) build ./...

## test: install missing test dependencies, check formatting, vet, and run every test with the race detector
test: deps fmt-check vet
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

## lab: run the whole system in one process on embedded defaults
lab:
	$(GO) run ./cmd/edgelab $(ARGS)
