#!/usr/bin/env bash
# Installs the Debian packages Spool's build and tests need, if missing.
# Usage: scripts/setup-debian.sh [group...]   groups: base gpu arm64 app (default: all)
set -euo pipefail

declare -A groups=(
  # curl: the README test (app/readme_test.go) runs its curl examples.
  [base]="gcc make git ca-certificates curl"
  # The Vulkan backend: loader headers, the shader compiler, the CPU Vulkan
  # device (lavapipe) the GPU tests run on, and the MSL translator check.
  [gpu]="libvulkan-dev glslc mesa-vulkan-drivers spirv-cross"
  [arm64]="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
  [app]="libgtk-3-dev libwebkit2gtk-4.1-dev xvfb dbus-x11 imagemagick chromium curl pkg-config"
)

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(base gpu arm64 app)

missing=()
for g in "${want[@]}"; do
  [ -n "${groups[$g]:-}" ] || { echo "setup-debian: unknown group $g" >&2; exit 2; }
  for p in ${groups[$g]}; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "setup-debian: missing packages ${missing[*]} and no apt-get; install them by hand" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "setup-debian: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
