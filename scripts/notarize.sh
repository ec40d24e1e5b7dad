#!/usr/bin/env bash
# Signs Spool.app with a Developer ID and the hardened runtime, builds the
# DMG from it, signs the DMG, has Apple notarize it and staples the ticket
# to the DMG and the app.
# Usage: scripts/notarize.sh bin/Spool.app bin/Spool-<version>-arm64.dmg
#
# Environment:
#   SPOOL_SIGN_IDENTITY   the signing identity, e.g. "Developer ID Application: Name (TEAMID)"
# and notarytool's credentials, one of:
#   SPOOL_NOTARY_PROFILE  a keychain profile made with `xcrun notarytool store-credentials`
#   SPOOL_NOTARY_KEY, SPOOL_NOTARY_KEY_ID, SPOOL_NOTARY_ISSUER
#                         an App Store Connect API key (.p8 path), its id and issuer
#   SPOOL_NOTARY_APPLE_ID, SPOOL_NOTARY_TEAM_ID, SPOOL_NOTARY_PASSWORD
#                         an Apple ID, its team and an app-specific password
set -euo pipefail
cd "$(dirname "$0")/.."

app=${1:?usage: notarize.sh APP DMG}
dmg=${2:?usage: notarize.sh APP DMG}
fail() { echo "notarize: $*" >&2; exit 1; }

[ "$(uname -s)" = Darwin ] || fail "needs macOS (codesign, xcrun notarytool, stapler); this is $(uname -s)"
for tool in codesign xcrun hdiutil spctl; do
	command -v "$tool" >/dev/null || fail "$tool is missing (install the Xcode command line tools)"
done
xcrun --find notarytool >/dev/null 2>&1 || fail "xcrun notarytool is missing (Xcode 13 or later)"
xcrun --find stapler >/dev/null 2>&1 || fail "xcrun stapler is missing"
[ -n "${SPOOL_SIGN_IDENTITY:-}" ] || fail "SPOOL_SIGN_IDENTITY is not set (a \"Developer ID Application: ...\" identity)"
security find-identity -v -p codesigning | grep -qF "$SPOOL_SIGN_IDENTITY" ||
	fail "the keychain has no valid codesigning identity \"$SPOOL_SIGN_IDENTITY\""

creds=()
if [ -n "${SPOOL_NOTARY_PROFILE:-}" ]; then
	creds=(--keychain-profile "$SPOOL_NOTARY_PROFILE")
elif [ -n "${SPOOL_NOTARY_KEY:-}" ]; then
	[ -n "${SPOOL_NOTARY_KEY_ID:-}" ] && [ -n "${SPOOL_NOTARY_ISSUER:-}" ] ||
		fail "SPOOL_NOTARY_KEY needs SPOOL_NOTARY_KEY_ID and SPOOL_NOTARY_ISSUER"
	[ -f "$SPOOL_NOTARY_KEY" ] || fail "SPOOL_NOTARY_KEY: $SPOOL_NOTARY_KEY is not a file"
	creds=(--key "$SPOOL_NOTARY_KEY" --key-id "$SPOOL_NOTARY_KEY_ID" --issuer "$SPOOL_NOTARY_ISSUER")
elif [ -n "${SPOOL_NOTARY_APPLE_ID:-}" ]; then
	[ -n "${SPOOL_NOTARY_TEAM_ID:-}" ] && [ -n "${SPOOL_NOTARY_PASSWORD:-}" ] ||
		fail "SPOOL_NOTARY_APPLE_ID needs SPOOL_NOTARY_TEAM_ID and SPOOL_NOTARY_PASSWORD"
	creds=(--apple-id "$SPOOL_NOTARY_APPLE_ID" --team-id "$SPOOL_NOTARY_TEAM_ID" --password "$SPOOL_NOTARY_PASSWORD")
else
	fail "no notarytool credentials: set SPOOL_NOTARY_PROFILE, or SPOOL_NOTARY_KEY/_KEY_ID/_ISSUER, or SPOOL_NOTARY_APPLE_ID/_TEAM_ID/_PASSWORD"
fi

fw="$app/Contents/Frameworks"
for lib in libvulkan.1.dylib libMoltenVK.dylib; do
	[ -f "$fw/$lib" ] || fail "$fw/$lib is missing; run make app (make app-vulkan bundles it)"
done
sign=(codesign --force --timestamp --options runtime --sign "$SPOOL_SIGN_IDENTITY")

# Inside out: the two dylibs the app loads with dlopen (library validation
# wants them signed by the same team), then the executable, then the
# bundle.
"${sign[@]}" "$fw/libvulkan.1.dylib" "$fw/libMoltenVK.dylib"
"${sign[@]}" "$app/Contents/MacOS/spool"
"${sign[@]}" "$app"
codesign --verify --deep --strict --verbose=2 "$app"

scripts/make-dmg.sh "$app" "$dmg"
codesign --force --timestamp --sign "$SPOOL_SIGN_IDENTITY" "$dmg"

xcrun notarytool submit "$dmg" "${creds[@]}" --wait --timeout 2h
xcrun stapler staple "$dmg"
xcrun stapler staple "$app"
xcrun stapler validate "$dmg"
spctl --assess --type open --context context:primary-signature --verbose=2 "$dmg"
spctl --assess --type execute --verbose=2 "$app"
echo "notarize: $dmg is signed, notarized and stapled"
