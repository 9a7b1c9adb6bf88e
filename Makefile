# herd — build, test, lint. `make test` is the README's test command and
# what .ci/run calls; it installs its own prerequisites first.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/herd-dev/herd/agent.Version=$(VERSION) -X github.com/herd-dev/herd/cli.Version=$(VERSION)
# nethttpomithttp2 leaves net/http's bundled HTTP/2 out: herd speaks
# HTTP/1.1 only (its API, metrics, readiness checks, artifact fetches),
# and the bundle cost each agent 0.5 MB of binary and 0.6 MB of RSS
# (BENCHMARKS.md "Idle and failover").
BUILD_TAGS := nethttpomithttp2
# GCFLAGS: the standard library and the other modules are built without
# inlining, except where an idle agent spends its CPU (the runtime,
# syscalls and the network poller, sync, time, crypto for TLS, SSH and
# gossip, go-msgpack for every Raft and gossip message) and herd's own
# code (its passes and failovers). The kernel maps the whole binary into
# every agent, and most of it (the HTTP server, TLS certificates,
# templates, TOML, DNS, the log stores' setup) an idle agent never runs:
# 0.95 MB smaller on amd64, so 0.8-1.3 MB less RSS on every agent, with the
# same allocations and CPU at idle and a steady placer pass 7 % slower
# (BENCHMARKS.md, "Idle: a binary built for size").
INLINED := runtime/... internal/... sync/... syscall time net crypto/... vendor/... \
	github.com/hashicorp/go-msgpack/... github.com/herd-dev/herd/...
GCFLAGS := -gcflags=all=-l $(foreach p,$(INLINED),-gcflags=$(p)=)
GOFLAGS_BUILD := -trimpath -tags $(BUILD_TAGS) -ldflags "$(LDFLAGS)" $(GCFLAGS)
TEST_TIMEOUT ?= 8m

.PHONY: all build test unit lint deps demo demo-local demo-pi bench clean

all: build

build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o bin/ ./cmd/herd ./cmd/herdctl

## test: prerequisites, lint, then every package's tests (unit, in-process
## cluster, real OpenSSH sshd on loopback).
test: deps lint unit

unit:
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if command -v shellcheck >/dev/null; then \
	  shellcheck -x $$(grep -slE '^#!.*(ba)?sh' scripts/* .ci/run); \
	else echo "lint: shellcheck not installed (scripts/deps installs it as root); skipping"; fi

## deps: what the tests need on a fresh Debian machine (OpenSSH for the
## executor tests). Skipped when already present.
deps:
	@scripts/deps

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1s ./...

## demo: a lab of 4 real systemd boards, herd bootstrapped onto them, the
## example applied, the power pulled on a board and back (needs root).
demo: build
	scripts/demo

## demo-pi: 3 amd64 servers + 2 arm64 VM boards set up like Raspberry Pi OS
## (needs root; first run builds the VM images): bootstrap as pi@, a
## deployment and a daemon on the VMs, power pulled on a VM and back, fenced.
demo-pi: build
	scripts/demo-pi

## demo-local: 3 agents on 127.0.0.1-3, no boards: kill -9 the leader.
demo-local: build
	scripts/demo-local

## e2e: the end-to-end suite on a lab of 4 boards and an arm64 VM board
## (needs root; ~10 min, +8 min once to build the VM images):
## power pulls, partition, kill -9, packet loss. The lab is taken down at
## the end, pass or fail. See e2e/doc.go.
.PHONY: e2e
e2e: build
	scripts/deps
	scripts/lab deps --vm
	$(GO) test -tags e2e -count=1 -timeout 40m -v ./e2e/; rc=$$?; scripts/lab down >/dev/null 2>&1; exit $$rc

## chaos: the nemesis on a lab of 5 boards (needs root; ~20 s a cycle):
## N mixed fault cycles, ground truth from the boards' systemd, a report;
## exit 1 if a hard invariant broke. See docs/lab.md.
.PHONY: chaos
N ?= 16
chaos:
	scripts/chaos $(N)

clean:
	rm -rf bin dist

# print-VAR: a variable's value, for scripts that build as make does.
print-%:
	@echo $($*)

## release: static binaries for amd64, arm64, armv7, armv6 in dist/ with
## SHA256SUMS and SIZES.txt (fails over the 20 MB budget). See docs/arm.md.
.PHONY: release test-arm
release:
	VERSION="$(VERSION)" LDFLAGS="$(LDFLAGS)" BUILD_TAGS="$(BUILD_TAGS)" GCFLAGS="$(GCFLAGS)" scripts/release

## test-arm: the -short tests built for arm64 and armv7, run under
## qemu-user (installs qemu-user-static + binfmt-support as root).
test-arm:
	scripts/test-arm
