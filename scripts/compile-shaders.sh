#!/bin/sh
# Compiles the GPU backend's GLSL compute shaders to SPIR-V.
# Usage: scripts/compile-shaders.sh SRC_DIR OUT_DIR
set -eu
src=$1
out=$2
command -v glslc >/dev/null || { echo "compile-shaders: glslc is missing (Debian: apt-get install glslc; macOS: brew install shaderc)" >&2; exit 1; }
mkdir -p "$out"
for f in "$src"/*.comp; do
	name=$(basename "$f" .comp)
	glslc -O --target-env=vulkan1.1 -fshader-stage=compute -Werror "$f" -o "$out/$name.spv.tmp"
	mv "$out/$name.spv.tmp" "$out/$name.spv"
done
