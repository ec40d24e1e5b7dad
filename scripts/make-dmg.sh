#!/usr/bin/env bash
# Builds a drag-to-Applications disk image of an app bundle with hdiutil:
# the app beside a link to /Applications, compressed (UDZO).
# Usage: scripts/make-dmg.sh bin/Spool.app bin/Spool-<version>-arm64.dmg
set -euo pipefail

app=${1:?usage: make-dmg.sh APP DMG}
dmg=${2:?usage: make-dmg.sh APP DMG}
[ "$(uname -s)" = Darwin ] || { echo "make-dmg: needs macOS (hdiutil); this is $(uname -s)" >&2; exit 1; }
command -v hdiutil >/dev/null || { echo "make-dmg: hdiutil is missing" >&2; exit 1; }
[ -x "$app/Contents/MacOS/spool" ] || { echo "make-dmg: $app has no Contents/MacOS/spool; run make app first" >&2; exit 1; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/spool-dmg.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# ditto keeps the bundle's signatures, extended attributes and symlinks.
ditto "$app" "$stage/$(basename "$app")"
ln -s /Applications "$stage/Applications"

mkdir -p "$(dirname "$dmg")"
rm -f "$dmg"
hdiutil create -volname Spool -srcfolder "$stage" -fs HFS+ -format UDZO -imagekey zlib-level=9 -ov "$dmg" >/dev/null
hdiutil verify "$dmg" >/dev/null
echo "make-dmg: $dmg ($(du -h "$dmg" | cut -f1))"
