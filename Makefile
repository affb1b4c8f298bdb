# swarm's build, test and measurement entry points. `make help` lists them.
GO      ?= go
BIN     := bin/swarm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION := v0.8.2

.DEFAULT_GOAL := help
.PHONY: help build test lint bench

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/swarm (static, no cgo)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/swarm

test: ## run every test with the race detector (offline)
	$(GO) test -race ./...

.PHONY: demo
demo: build ## a whole swarm run, offline: three scripted agents in a temporary repo
	$(GO) run ./demo -swarm $(BIN)

lint: ## go vet, gofmt, and staticcheck when it can be installed
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...; \
	else echo "staticcheck could not be installed from the module proxy; skipped"; fi

bench: ## run the Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...
