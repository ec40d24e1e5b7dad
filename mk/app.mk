# The app: the web UI (frontend/, Vite + TypeScript), the desktop shell
# (app/ with Wails v2 and the menu bar) and their tests. The Makefile
# includes this file after defining GO, BIN and MODEL.
#
#   make ui             frontend/dist (npm ci, npm run build)
#   make spool-ui       bin/spool with the UI built in (headless: no GUI libraries)
#   make app            macOS: bin/Spool.app; Linux: bin/spool-desktop (webkit2gtk 4.1)
#   make e2e            browser end-to-end tests (headless Chromium) against bin/spool
#   make desktop-smoke  opens bin/spool-desktop under Xvfb and saves a screenshot
#   make run-app        the desktop app when a display is available, else the
#                       engine with the UI at http://127.0.0.1:8484/
#   make atlas          recompute assets/atlas/glm52-demo.experts.json

NPM         ?= npm
UNAME_S     := $(shell uname -s)
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
APP_LDFLAGS := -X main.version=$(VERSION)
# embedui embeds frontend/dist; without it the binary serves a placeholder.
# vulkan builds the GPU backend (mk/gpu.mk).
APP_TAGS    := headless,embedui,vulkan
DESKTOP_BIN := bin/spool-desktop
APP_BUNDLE  := bin/Spool.app
ARTIFACTS   := test-artifacts
UI_DIST     := frontend/dist/index.html
UI_STAMP    := frontend/node_modules/.package-lock.json
UI_SRC      := $(wildcard frontend/src/*.ts frontend/src/*.css frontend/public/*) \
               frontend/index.html frontend/vite.config.ts frontend/tsconfig.json

.PHONY: ui app-deps spool-ui desktop app e2e desktop-smoke run-app atlas app-clean

app-deps:
	@scripts/setup-debian.sh app

# npm ci rewrites node_modules/.package-lock.json: it is the install stamp.
$(UI_STAMP): frontend/package.json frontend/package-lock.json
	cd frontend && $(NPM) ci --no-audit --no-fund

$(UI_DIST): $(UI_STAMP) $(UI_SRC)
	cd frontend && $(NPM) run build

ui: $(UI_DIST)

spool-ui: ui shaders
	$(GO) build -tags $(APP_TAGS) -ldflags "$(APP_LDFLAGS)" -o $(BIN) ./app

ifeq ($(UNAME_S),Darwin)
# Spool.app: the desktop build, Info.plist (LSUIElement), icon, the demo
# model and its atlas in Resources, ad-hoc signed for local use.
APP_CGO := CGO_ENABLED=1 CGO_CFLAGS="-mmacosx-version-min=11.0" \
           CGO_LDFLAGS="-framework UniformTypeIdentifiers -mmacosx-version-min=11.0"
app: ui shaders
	rm -rf $(APP_BUNDLE)
	mkdir -p $(APP_BUNDLE)/Contents/MacOS $(APP_BUNDLE)/Contents/Resources/models $(APP_BUNDLE)/Contents/Resources/atlas
	$(APP_CGO) $(GO) build -tags desktop,production,embedui,vulkan -ldflags "$(APP_LDFLAGS) -s -w" \
		-o $(APP_BUNDLE)/Contents/MacOS/spool ./app
	sed 's/@VERSION@/$(VERSION)/g' app/darwin/Info.plist > $(APP_BUNDLE)/Contents/Info.plist
	rm -rf bin/Spool.iconset && mkdir -p bin/Spool.iconset
	for s in 16 32 128 256 512; do \
		sips -z $$s $$s app/icons/appicon.png --out bin/Spool.iconset/icon_$${s}x$${s}.png >/dev/null; \
		sips -z $$((s*2)) $$((s*2)) app/icons/appicon.png --out bin/Spool.iconset/icon_$${s}x$${s}@2x.png >/dev/null; \
	done
	iconutil -c icns bin/Spool.iconset -o $(APP_BUNDLE)/Contents/Resources/Spool.icns
	cp -R $(MODEL) $(APP_BUNDLE)/Contents/Resources/models/
	cp assets/atlas/glm52-demo.experts.json $(APP_BUNDLE)/Contents/Resources/atlas/
	$(MAKE) app-vulkan
	codesign --force --deep -s - $(APP_BUNDLE)

desktop: app

run-app: app
	open $(APP_BUNDLE)
else
# Linux: Wails without its CLI needs these tags; webkit2gtk 4.1 is what
# Debian 12+ and Ubuntu 24.04+ ship.
desktop: app-deps ui shaders
	CGO_ENABLED=1 $(GO) build -tags desktop,production,webkit2_41,embedui,vulkan -ldflags "$(APP_LDFLAGS)" -o $(DESKTOP_BIN) ./app

app: desktop

run-app: spool-ui
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] && pkg-config --exists webkit2gtk-4.1 2>/dev/null; then \
		$(MAKE) desktop && $(DESKTOP_BIN) app --model $(MODEL); \
	else \
		echo "No display: serving the engine and the UI at http://127.0.0.1:8484/"; \
		$(BIN) app --no-window --model $(MODEL); \
	fi
endif

# The e2e suite's stand-in for the Hugging Face Hub (download tests).
STANDIN_HUB := bin/standinhub

e2e: app-deps spool-ui
	$(GO) build -o $(STANDIN_HUB) ./frontend/e2e/standinhub
	mkdir -p $(ARTIFACTS)/e2e
	cd frontend && SPOOL_BIN=$(abspath $(BIN)) SPOOL_MODEL_DIR=$(abspath $(MODEL)) \
		SPOOL_STANDIN_HUB=$(abspath $(STANDIN_HUB)) SPOOL_ARTIFACTS=$(abspath $(ARTIFACTS))/e2e $(NPM) run e2e

desktop-smoke: desktop
	mk/desktop-smoke.sh $(DESKTOP_BIN) $(ARTIFACTS)/desktop $(MODEL)

atlas: spool-ui
	$(BIN) atlas --model $(MODEL) --out assets/atlas/glm52-demo.experts.json

app-clean:
	rm -rf frontend/dist $(DESKTOP_BIN) $(APP_BUNDLE) bin/Spool.iconset $(ARTIFACTS)
