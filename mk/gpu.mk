# The GPU backend (kernels/gpu, Vulkan): GLSL compute shaders compiled to
# SPIR-V by glslc (generated, not committed) and embedded into builds with
# the vulkan tag. The Makefile includes this file after defining GO.
#
#   make shaders      kernels/gpu/spv/*.spv (glslc)
#   make shaders-msl  translate every shader to Metal Shading Language with
#                     spirv-cross, as MoltenVK does on macOS (a check only)
#   make app-vulkan   macOS: copy the Vulkan loader and MoltenVK (Homebrew
#                     vulkan-loader, molten-vk) into bin/Spool.app
#
# A plain `go build` without the tag needs neither glslc nor Vulkan: the
# backend then reports itself unavailable and the engine runs on the CPU.

GPU_SHADERS := $(wildcard kernels/gpu/shaders/*.comp)
GPU_STAMP   := kernels/gpu/spv/.stamp

.PHONY: gpu-deps shaders shaders-msl app-vulkan

# Debian gets glslc and friends from setup-debian; a Mac needs
# `brew install shaderc vulkan-headers vulkan-loader molten-vk`.
gpu-deps:
	@if [ "$$(uname -s)" = Linux ]; then scripts/setup-debian.sh gpu; fi

$(GPU_STAMP): $(GPU_SHADERS) scripts/compile-shaders.sh
	scripts/compile-shaders.sh kernels/gpu/shaders kernels/gpu/spv
	@touch $@

shaders: gpu-deps $(GPU_STAMP)

# MoltenVK turns SPIR-V into MSL with SPIRV-Cross when it builds a
# pipeline; the same translation here (MSL 2.1: macOS 11 on Apple silicon)
# catches shaders Metal could not run before a Mac ever sees them.
shaders-msl: shaders
	@command -v spirv-cross >/dev/null || { echo "shaders-msl: spirv-cross is missing (scripts/setup-debian.sh gpu)" >&2; exit 1; }
	@for f in kernels/gpu/spv/*.spv; do \
		spirv-cross --msl --msl-version 20100 "$$f" --output /dev/null || { echo "shaders-msl: $$f does not translate to MSL" >&2; exit 1; }; \
	done
	@echo "shaders-msl: every shader translates to MSL 2.1"

# Spool.app/Contents/Frameworks holds the loader and MoltenVK; the loader
# finds MoltenVK through the manifest in Contents/Resources/vulkan/icd.d,
# which it searches first inside an app bundle. kernels/gpu opens
# Frameworks/libvulkan.1.dylib next to the executable.
VK_BUNDLE_FW  = $(APP_BUNDLE)/Contents/Frameworks
VK_BUNDLE_ICD = $(APP_BUNDLE)/Contents/Resources/vulkan/icd.d
app-vulkan:
	@command -v brew >/dev/null || { echo "app-vulkan: Homebrew is needed (brew install vulkan-loader molten-vk)" >&2; exit 1; }
	@loader=$$(brew --prefix vulkan-loader)/lib/libvulkan.1.dylib; \
	mvk=$$(brew --prefix molten-vk)/lib/libMoltenVK.dylib; \
	icd=$$(brew --prefix molten-vk)/share/vulkan/icd.d/MoltenVK_icd.json; \
	for f in $$loader $$mvk $$icd; do [ -e "$$f" ] || { echo "app-vulkan: $$f is missing (brew install vulkan-loader molten-vk)" >&2; exit 1; }; done; \
	mkdir -p $(VK_BUNDLE_FW) $(VK_BUNDLE_ICD); \
	cp -L "$$loader" $(VK_BUNDLE_FW)/libvulkan.1.dylib; \
	cp -L "$$mvk" $(VK_BUNDLE_FW)/libMoltenVK.dylib; \
	sed -E 's|"library_path"[[:space:]]*:[[:space:]]*"[^"]*"|"library_path": "../../../Frameworks/libMoltenVK.dylib"|' "$$icd" > $(VK_BUNDLE_ICD)/MoltenVK_icd.json; \
	grep -q '"../../../Frameworks/libMoltenVK.dylib"' $(VK_BUNDLE_ICD)/MoltenVK_icd.json || { echo "app-vulkan: could not rewrite $$icd" >&2; exit 1; }; \
	install_name_tool -id @rpath/libvulkan.1.dylib $(VK_BUNDLE_FW)/libvulkan.1.dylib; \
	install_name_tool -id @rpath/libMoltenVK.dylib $(VK_BUNDLE_FW)/libMoltenVK.dylib; \
	for f in $(VK_BUNDLE_FW)/libvulkan.1.dylib $(VK_BUNDLE_FW)/libMoltenVK.dylib; do \
		if otool -L "$$f" | tail -n +2 | grep -q "$$(brew --prefix)"; then \
			echo "app-vulkan: $$f links against Homebrew libraries, which a user's Mac lacks:" >&2; otool -L "$$f" >&2; exit 1; \
		fi; \
	done; \
	echo "app-vulkan: bundled the Vulkan loader and MoltenVK ($$(du -sh $(VK_BUNDLE_FW) | cut -f1) in Frameworks)"
