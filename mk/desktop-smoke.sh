#!/usr/bin/env bash
# Desktop smoke test: starts the Linux desktop build (Wails + webkit2gtk
# 4.1) on a virtual display (Xvfb) with a private D-Bus session, waits for
# the engine to serve, gives the webview time to render, saves a
# screenshot of the screen, and checks that the window is not blank.
#
# Usage: mk/desktop-smoke.sh BINARY [OUT_DIR] [MODEL_DIR]
# Needs: xvfb, dbus (dbus-run-session), imagemagick (import, convert), curl.
set -euo pipefail

bin=${1:?usage: mk/desktop-smoke.sh BINARY [OUT_DIR] [MODEL_DIR]}
out=${2:-test-artifacts/desktop}
model=${3:-assets/models/glm52-demo}
mkdir -p "$out"
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
disp=:$((90 + RANDOM % 100))

cleanup() {
  [ -f "$work/app.pid" ] && kill "$(cat "$work/app.pid")" 2>/dev/null || true
  [ -n "${xvfb:-}" ] && kill "$xvfb" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

Xvfb "$disp" -screen 0 1280x860x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb=$!
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${disp#:}" ] && break; sleep 0.1; done

export DISPLAY=$disp SPOOL_SETTINGS=$work/settings.json XDG_CACHE_HOME=$work/cache HF_HUB_OFFLINE=1
export WEBKIT_DISABLE_COMPOSITING_MODE=1 LIBGL_ALWAYS_SOFTWARE=1
dbus-run-session -- sh -c 'echo $$ >"$0/app.pid"; exec "$1" app --model "$2" --port "$3"' \
  "$work" "$bin" "$model" "$port" >"$out/desktop.log" 2>&1 &

ok=
for _ in $(seq 600); do
  if curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1; then ok=1; break; fi
  sleep 0.1
done
if [ -z "$ok" ]; then
  echo "desktop-smoke: the engine did not start; log:" >&2
  cat "$out/desktop.log" >&2
  exit 1
fi
# The webview loads the UI, connects to the events websocket and shows
# "Ready" in the sidebar.
sleep 6
import -display "$disp" -window root "$out/desktop.png"
spread=$(convert "$out/desktop.png" -colorspace Gray -format '%[fx:standard_deviation]' info:)
colours=$(convert "$out/desktop.png" -format '%k' info:)
echo "desktop-smoke: screenshot $out/desktop.png (grey spread $spread, $colours colours)"
awk -v s="$spread" -v c="$colours" 'BEGIN { exit !(s > 0.05 && c > 50) }' || {
  echo "desktop-smoke: the screenshot looks blank" >&2
  cat "$out/desktop.log" >&2
  exit 1
}
kill -0 "$(cat "$work/app.pid")" || { echo "desktop-smoke: the app exited" >&2; cat "$out/desktop.log" >&2; exit 1; }
echo "desktop-smoke: ok"
