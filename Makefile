# swarm's build, test and measurement entry points. `make help` lists them.
GO      ?= go
BIN     := bin/swarm
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
STATICCHECK_VERSION := v0.8.2

.DEFAULT_GOAL := help
.PHONY: help build test lint bench bench-go reliability fuzz

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/swarm (the quick front) and bin/swarmd (the whole program it hands the rest to): static, no cgo
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/swarm ./cmd/swarmd

test: ## run every test with the race detector (offline; the PostgreSQL half needs the postgresql package)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		echo "PostgreSQL tests skipped: no initdb/pg_ctl found (on Debian: apt-get install postgresql; they run from /usr/lib/postgresql/<version>/bin)"
	$(GO) test -race -timeout 25m ./...

.PHONY: demo
demo: ## a whole swarm run, offline: three scripted agents in a temporary repo
	@echo "building swarm… (the first build takes a minute or so)"
	@$(MAKE) --no-print-directory build
	$(GO) run ./demo -swarm $(BIN)

lint: ## go vet, gofmt, and staticcheck when it can be installed
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...; \
	else echo "staticcheck could not be installed from the module proxy; skipped"; fi

# The previous release P2 and P4 are compared with, side by side: a tag or
# commit; auto is the latest tag, else main before its last merge; none
# skips it.
SWARM_BENCH_BASE ?= auto

bench: build ## measure P1-P13 (P2, P4 also with SWARM_BENCH_BASE's build): one table, bench/results.json
	$(GO) run ./cmd/swarmbench -bin $(BIN) -out bench/results.json -base "$(SWARM_BENCH_BASE)"

bench-go: ## run the Go micro-benchmarks (go test -bench)
	$(GO) test -run '^$$' -bench . -benchmem ./...

reliability: build ## the slow reliability suite (R1-R9; R9 needs PostgreSQL) against bin/swarm (6-10 min on 2 CPUs)
	SWARM_BIN=$(abspath $(BIN)) $(GO) test -tags reliability -count=1 -timeout 20m -v ./reliability/

# Fuzz targets, package:name; each runs for FUZZTIME. They live in packages
# that do not import modernc.org/sqlite, so the instrumented builds are quick.
# Minimizing each new input may take a minute by default, and those runs are
# not counted: capped, a 10 s run spends its time fuzzing.
FUZZTIME     ?= 10s
FUZZMINIMIZE ?= 1000x
FUZZ_TARGETS := ./config:FuzzParse ./beads:FuzzParseReady ./message:FuzzValidate ./engine:FuzzToolArgs ./engine:FuzzSandboxPath ./protocol:FuzzValidate ./termsafe:FuzzString ./tomlfile:FuzzUnknownKeys

# Go's fuzzing coordinator can end a duration-bounded run with "context
# deadline exceeded" and no failing input (a race at -fuzztime expiry, not a
# finding). A run fails only when it wrote a failing input to
# testdata/fuzz/<name>, or failed for any other reason.
fuzz: ## run every fuzz target for FUZZTIME (default 10s each)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; corpus=$$pkg/testdata/fuzz/$$name; \
		echo "== $$name in $$pkg for $(FUZZTIME)"; \
		before=$$(ls $$corpus 2>/dev/null | wc -l); \
		if out=$$($(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg 2>&1); then \
			echo "$$out"; \
		else \
			echo "$$out"; after=$$(ls $$corpus 2>/dev/null | wc -l); \
			if [ "$$after" = "$$before" ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input'; then \
				echo "== $$name: the fuzzer's deadline race at -fuzztime expiry, no failing input: not a finding"; \
			else \
				echo "== $$name found a failing input (see $$corpus)"; exit 1; \
			fi; \
		fi; \
	done

# The exec presets are checked against these releases of the published CLIs.
CLI_PREFIX   ?= $(HOME)/.cache/swarm/clis
CLI_PACKAGES := @anthropic-ai/claude-code@2.1.197 @openai/codex@0.169.0 @google/gemini-cli@0.61.0

# As root, the CLIs run again as CLI_USER (gemini-cli treats root
# differently): the test binaries and a hard-linked copy of the CLIs go in
# a directory that user can read (under /var/tmp: a sandboxed session has
# a private /tmp), with a home of its own; TMPDIR stays
# /tmp, where the control sockets' paths are short enough.
CLI_USER     ?= nobody

.PHONY: presets
presets: ## install claude, codex and gemini-cli from npm; journeys where each calls swarm's MCP tools against fake model APIs (as root, also as CLI_USER)
	npm install --prefix $(CLI_PREFIX) --no-audit --no-fund --loglevel=error $(CLI_PACKAGES)
	PATH=$(CLI_PREFIX)/node_modules/.bin:$$PATH SWARM_TEST_CLIS=1 $(GO) test -count=1 -run 'CLI' -v ./engine/exec/ ./cmd/swarmd/
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory presets-user; fi

.PHONY: presets-user
presets-user: ## (as root) the presets' tests again as CLI_USER
	set -e; dir=$$(mktemp -d /var/tmp/swarm-presets-XXXXXX); trap 'rm -rf "$$dir"' EXIT; chmod 755 "$$dir"; \
	cp -al $(CLI_PREFIX) "$$dir/clis" 2>/dev/null || cp -a $(CLI_PREFIX) "$$dir/clis"; \
	$(GO) test -c -o "$$dir/exec.test" ./engine/exec/; $(GO) test -c -o "$$dir/swarmd.test" ./cmd/swarmd/; $(GO) build -o "$$dir/swarm" ./cmd/swarm; \
	mkdir "$$dir/home"; chown $(CLI_USER) "$$dir/home"; \
	for pkg in engine/exec:exec cmd/swarmd:swarmd; do \
		(cd "$${pkg%%:*}" && runuser -u $(CLI_USER) -- env HOME="$$dir/home" TMPDIR=/tmp PATH="$$dir/clis/node_modules/.bin:$$PATH" SWARM_TEST_CLIS=1 SWARM_FRONT="$$dir/swarm" \
			"$$dir/$${pkg##*:}.test" -test.count=1 -test.run CLI -test.v); \
	done
