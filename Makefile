# Spool: `make run` starts Spool on the demo model (the desktop app where a
# display is available, else the engine with the web UI at
# http://127.0.0.1:8484/), `make test` runs every check. Both install what
# they need on a Debian machine.

GO        ?= go
BIN       := bin/spool
MODEL     ?= assets/models/glm52-demo
# vulkan builds the GPU backend (kernels/gpu, mk/gpu.mk); without it the
# engine runs on the CPU only.
GOFLAGS_HEADLESS := -tags headless,vulkan
# Packages with no OS-specific code must also build for the Mac.
PORTABLE  := ./engine/... ./kernels/... ./internal/...

.PHONY: all build run demo test deps vet unit darwin arm64 conformance remote-conformance agents clean

all: build

deps:
	@scripts/setup-debian.sh base gpu
	@$(GO) mod download

build: deps shaders
	$(GO) build $(GOFLAGS_HEADLESS) -o $(BIN) ./app

run: run-app

# A one-shot answer from the demo model in the terminal.
demo: build
	$(BIN) run --model $(MODEL) --temperature 0 --max-tokens 64 \
		--chat "What does the function re.compile do?"

test: deps vet unit darwin arm64 shaders-msl release-check conformance remote-conformance agents e2e desktop-smoke

vet: shaders
	$(GO) vet $(GOFLAGS_HEADLESS) ./...
	$(GO) vet -tags headless ./kernels/gpu/ ./engine/model/

unit: shaders
	$(GO) test $(GOFLAGS_HEADLESS) -count=1 ./...
	$(GO) test -tags headless -count=1 ./kernels/gpu/

darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(PORTABLE)

arm64:
	@scripts/setup-debian.sh arm64
	kernels/test-arm64.sh

# Unmodified clients against `spool serve` on the demo model: the official
# openai and @anthropic-ai/sdk SDKs, the Vercel AI SDK and LangChain JS. They
# need Node 22, which the suite's own `node` package provides.
conformance: build
	cd engine/server/conformance && npm ci --no-audit --no-fund --loglevel=error && \
		SPOOL_BIN=$(CURDIR)/$(BIN) SPOOL_MODEL=$(CURDIR)/$(MODEL) node_modules/.bin/node run.mjs

# Codex CLI, Claude Code, opencode and GitHub Copilot CLI (native binaries
# in their npm packages, ~1.4 GB) each complete a turn against `spool serve` in their
# default configuration (9-15k-token prompts), in a loopback-only network
# namespace where root can make one. The lock lists every per-platform
# binary package of opencode-ai (its optionalDependencies), which `npm ci`
# requires; those the registry here lacks (all but linux-x64 and
# linux-x64-baseline) are listed without an integrity.
agents: build
	cd engine/server/agents && npm ci --no-audit --no-fund --loglevel=error && \
		SPOOL_BIN=$(CURDIR)/$(BIN) node run.mjs

# The same clients through `spool serve --remote`, with the vLLM stand-in
# and a second `spool serve` on the demo model as the remotes.
STANDIN := bin/vllm-standin
remote-conformance: build
	$(GO) build -o $(STANDIN) ./engine/remote/standin/cmd/vllm-standin
	cd engine/server/remoteconformance && npm ci --no-audit --no-fund --loglevel=error && \
		SPOOL_BIN=$(CURDIR)/$(BIN) SPOOL_MODEL=$(CURDIR)/$(MODEL) STANDIN_BIN=$(CURDIR)/$(STANDIN) node --test

clean: app-clean
	rm -rf bin kernels/gpu/spv

include mk/gpu.mk
include mk/app.mk
include mk/mac.mk
