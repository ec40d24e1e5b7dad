# The Mac: checks that need macOS, the release packaging, and their checks
# on Linux. The Makefile includes this file after mk/app.mk (APP_BUNDLE,
# VERSION, APP_TAGS, MODEL). The README's "On a Mac" section lists these
# commands in the order the macOS CI job (.github/workflows/macos.yml)
# runs them.
#
#   make mac-deps         Homebrew: go, node, shaderc, vulkan-headers, vulkan-loader, molten-vk
#   make mac-vet          go vet of every package for darwin/arm64 with cgo (desktop shell included)
#   make mac-unit         go test of every package with cgo; GPU tests on the Mac's GPU
#   make mac-gpu          the GPU parity tests through the loader and MoltenVK inside Spool.app
#   make mac-conformance  the SDK conformance suite against Spool.app's engine
#   make mac-e2e          the web UI suite (Google Chrome) against Spool.app's engine
#   make mac-smoke        open Spool.app, wait for /health, quit it
#   make dmg              bin/Spool-<version>-arm64.dmg (drag to Applications)
#   make notarize         Developer ID signing, notarization and stapling (scripts/notarize.sh)
#   make release-check    Linux: the workflows (actionlint) and these recipes (syntax, files, names)

# The release's version without the tag's "v"; the DMG's name is what the
# release job uploads and packaging/spool.rb downloads.
DMG_VERSION := $(patsubst v%,%,$(VERSION))
DMG         := bin/Spool-$(DMG_VERSION)-arm64.dmg
APP_EXE     := $(APP_BUNDLE)/Contents/MacOS/spool
MAC_BREW    := go node shaderc vulkan-headers vulkan-loader molten-vk
ACTIONLINT  := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
MAC_SCRIPTS := scripts/make-dmg.sh scripts/notarize.sh scripts/mac-smoke.sh

.PHONY: mac-deps mac-vet mac-unit mac-gpu mac-conformance mac-e2e mac-smoke dmg notarize release-check actionlint

# Fails off a Mac, naming what is missing.
define need-mac
	@if [ "$$(uname -s)" != Darwin ]; then \
		echo "make $@: needs macOS ($(1)); this is $$(uname -s). On Linux, make release-check checks the recipe." >&2; exit 1; \
	fi
endef

mac-deps:
	$(call need-mac,Homebrew)
	@command -v brew >/dev/null || { echo "make $@: Homebrew is missing (https://brew.sh)" >&2; exit 1; }
	brew install $(MAC_BREW)

mac-vet: shaders
	$(call need-mac,cgo against the macOS SDK)
	CGO_ENABLED=1 $(GO) vet $(GOFLAGS_HEADLESS) ./...
	CGO_ENABLED=1 $(GO) vet -tags desktop,production,embedui,vulkan ./app/

# The GPU tests find Homebrew's loader ($(brew --prefix)/lib) and MoltenVK
# through its manifest; with CI=true a missing device fails them.
mac-unit: shaders
	$(call need-mac,cgo and Metal)
	VK_DRIVER_FILES=$$(brew --prefix molten-vk)/share/vulkan/icd.d/MoltenVK_icd.json \
		CGO_ENABLED=1 $(GO) test $(GOFLAGS_HEADLESS) -count=1 ./...
	CGO_ENABLED=1 $(GO) test -tags headless -count=1 ./kernels/gpu/

# The parity tests again, through the loader and MoltenVK that Spool.app
# carries (what a user's Mac runs), not Homebrew's.
mac-gpu:
	$(call need-mac,Metal)
	@[ -d $(APP_BUNDLE)/Contents/Frameworks ] || { echo "make $@: $(APP_BUNDLE) has no Frameworks; run make app first" >&2; exit 1; }
	SPOOL_VULKAN_LOADER=$(abspath $(APP_BUNDLE))/Contents/Frameworks/libvulkan.1.dylib \
		VK_DRIVER_FILES=$(abspath $(APP_BUNDLE))/Contents/Resources/vulkan/icd.d/MoltenVK_icd.json \
		CGO_ENABLED=1 $(GO) test $(GOFLAGS_HEADLESS) -count=1 -run 'TestBackend|Parity|TestInfo' ./engine/model/ ./kernels/gpu/

mac-conformance:
	$(call need-mac,Spool.app)
	@[ -x $(APP_EXE) ] || { echo "make $@: $(APP_EXE) is missing; run make app first" >&2; exit 1; }
	cd engine/server/conformance && $(NPM) ci --no-audit --no-fund --loglevel=error && \
		SPOOL_BIN=$(abspath $(APP_EXE)) SPOOL_MODEL=$(abspath $(MODEL)) node_modules/.bin/node run.mjs

# Google Chrome stands in for Debian's Chromium (playwright-core drives it).
MAC_CHROME ?= /Applications/Google Chrome.app/Contents/MacOS/Google Chrome
mac-e2e:
	$(call need-mac,Spool.app and Google Chrome)
	@[ -x $(APP_EXE) ] || { echo "make $@: $(APP_EXE) is missing; run make app first" >&2; exit 1; }
	@[ -x "$(MAC_CHROME)" ] || { echo "make $@: $(MAC_CHROME) is missing (set MAC_CHROME)" >&2; exit 1; }
	$(GO) build -o $(STANDIN_HUB) ./frontend/e2e/standinhub
	mkdir -p $(ARTIFACTS)/e2e
	cd frontend && $(NPM) ci --no-audit --no-fund && CHROMIUM="$(MAC_CHROME)" SPOOL_BIN=$(abspath $(APP_EXE)) \
		SPOOL_MODEL_DIR=$(abspath $(MODEL)) SPOOL_STANDIN_HUB=$(abspath $(STANDIN_HUB)) \
		SPOOL_ARTIFACTS=$(abspath $(ARTIFACTS))/e2e $(NPM) run e2e

mac-smoke:
	$(call need-mac,open and Spool.app)
	scripts/mac-smoke.sh $(APP_BUNDLE) $(ARTIFACTS)/mac-smoke

dmg:
	$(call need-mac,hdiutil)
	@[ -d $(APP_BUNDLE) ] || { echo "make $@: $(APP_BUNDLE) is missing; run make app first" >&2; exit 1; }
	scripts/make-dmg.sh $(APP_BUNDLE) $(DMG)

notarize:
	$(call need-mac,codesign and Xcode's notarytool and stapler)
	@[ -d $(APP_BUNDLE) ] || { echo "make $@: $(APP_BUNDLE) is missing; run make app first" >&2; exit 1; }
	scripts/notarize.sh $(APP_BUNDLE) $(DMG)

# actionlint (a Go module, pinned) over the workflows. shellcheck and
# pyflakes are left out so that the result does not depend on what else
# the machine has.
actionlint:
	$(GO) run $(ACTIONLINT) -shellcheck= -pyflakes= .github/workflows/*.yml

# On Linux: the workflows lint, the scripts parse, the Mac-only targets
# refuse to run with a clear message, and packaging/ checks names and
# files (the cask's DMG is the release job's, the README's Mac commands are
# the macOS job's steps, every file a recipe names exists).
release-check: actionlint
	@for s in $(MAC_SCRIPTS); do bash -n $$s || exit 1; done
	@if [ "$$(uname -s)" != Darwin ]; then for t in mac-deps mac-gpu mac-conformance mac-e2e mac-smoke dmg notarize; do \
		if out=$$($(MAKE) --no-print-directory $$t 2>&1); then echo "release-check: make $$t ran off a Mac" >&2; exit 1; fi; \
		echo "$$out" | grep -q "needs macOS" || { echo "release-check: make $$t failed without naming macOS: $$out" >&2; exit 1; }; \
	done; fi
	$(GO) test -count=1 ./packaging/
	@echo "release-check: workflows, scripts and packaging are consistent"
