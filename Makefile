# sless — see README.md. Every target installs or builds what it needs.
SHELL := /bin/bash
GO ?= go
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
BIN := bin
TEST_TIMEOUT ?= 45m

.PHONY: all build generate test test-assets run lint vet fmt bench clean

all: build

# `sless version` reports these; build info lacks them under -buildvcs=false.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sless ./cmd/sless

generate:
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(CONTROLLER_GEN) crd:crdVersions=v1,maxDescLen=400 paths=./pkg/apis/... output:crd:dir=config/crd
	$(CONTROLLER_GEN) rbac:roleName=sless-controller paths=./pkg/reconciler/... output:rbac:dir=config/rbac

# Builds kube-apiserver, kubectl, etcd, versitygw and Knative's and Tekton's
# controllers and a real node's programs from the Go module proxy once (24
# minutes cold on 2 idle cores), then reuses them.
test-assets:
	@bash hack/test-assets.sh >/dev/null

test: test-assets
	bash hack/test.sh

bench: test-assets
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./bench/... ./pkg/... ./runtimes/...

run:
	bash hack/run.sh

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf $(BIN)
