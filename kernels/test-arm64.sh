#!/bin/sh
# Cross-compiles the kernels test binary for linux/arm64 (the NEON path) and
# runs it under qemu-user. Needs the Debian packages gcc-aarch64-linux-gnu,
# libc6-dev-arm64-cross and qemu-user (or qemu-user-static).
# Extra arguments go to the test binary, e.g. ./test-arm64.sh -test.v.
set -eu

cd "$(dirname "$0")"

QEMU=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
if [ -z "$QEMU" ]; then
	echo "test-arm64.sh: qemu-aarch64 not found (apt-get install qemu-user)" >&2
	exit 1
fi
CC=${CC_ARM64:-aarch64-linux-gnu-gcc}
if ! command -v "$CC" >/dev/null 2>&1; then
	echo "test-arm64.sh: $CC not found (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2
	exit 1
fi
SYSROOT=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}

BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT

CGO_ENABLED=1 GOOS=linux GOARCH=arm64 CC="$CC" go test -c -o "$BIN/kernels.test" .
"$QEMU" -L "$SYSROOT" "$BIN/kernels.test" -test.count=1 "$@"
