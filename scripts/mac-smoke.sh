#!/usr/bin/env bash
# Opens Spool.app as a user would (open -W), waits for its engine's
# /health, saves /stats, quits the app through AppleScript and waits for it
# to exit.
# Usage: scripts/mac-smoke.sh bin/Spool.app test-artifacts/mac-smoke
set -euo pipefail

app=${1:?usage: mac-smoke.sh APP OUTDIR}
out=${2:?usage: mac-smoke.sh APP OUTDIR}
[ "$(uname -s)" = Darwin ] || { echo "mac-smoke: needs macOS (open, osascript); this is $(uname -s)" >&2; exit 1; }
[ -x "$app/Contents/MacOS/spool" ] || { echo "mac-smoke: $app has no Contents/MacOS/spool; run make app first" >&2; exit 1; }
mkdir -p "$out"
url=http://127.0.0.1:8484
bundle_id=$(/usr/libexec/PlistBuddy -c 'Print :CFBundleIdentifier' "$app/Contents/Info.plist")

if curl -sf "$url/health" >/dev/null 2>&1; then
	echo "mac-smoke: something already answers on $url; stop it first" >&2
	exit 1
fi

# open -W returns when the app has exited; -n starts a new instance.
open -W -n "$app" --stdout "$out/stdout.log" --stderr "$out/stderr.log" &
opener=$!

ok=""
for _ in $(seq 240); do
	if curl -sf "$url/health" -o "$out/health.json"; then
		ok=1
		break
	fi
	if ! kill -0 "$opener" 2>/dev/null; then
		echo "mac-smoke: Spool.app exited before answering /health" >&2
		cat "$out/stderr.log" >&2 || true
		exit 1
	fi
	sleep 0.5
done
if [ -z "$ok" ]; then
	echo "mac-smoke: no /health from Spool.app after 240 tries" >&2
	cat "$out/stderr.log" >&2 || true
	kill "$opener" 2>/dev/null || true
	exit 1
fi
curl -sf "$url/stats" -o "$out/stats.json"
echo "mac-smoke: /health: $(cat "$out/health.json")"

osascript -e "tell application id \"$bundle_id\" to quit"
if ! wait "$opener"; then
	echo "mac-smoke: open -W reported a failure after quit" >&2
	exit 1
fi
if curl -sf "$url/health" >/dev/null 2>&1; then
	echo "mac-smoke: the engine still answers after Spool.app quit" >&2
	exit 1
fi
echo "mac-smoke: Spool.app started, answered /health and quit"
