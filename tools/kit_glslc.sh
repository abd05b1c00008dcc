#!/usr/bin/env bash
# tools/kit_glslc.sh [KIT]  — put Debian 14's glslc into a device kit.
#
# The device kit (../shared/device/kit.sh) carries Debian 13's shaderc 2025.2,
# which predates GL_EXT_bfloat16; CMake then builds no bfloat16 cooperative-matrix
# kernels (helios info says so). This swaps in forky's glslc and libshaderc1
# (glslang and SPIRV-Tools built in; they need libc6 >= 2.38 and libstdc++6 >=
# 13.1, which Ubuntu 24.04 has), the same compiler tools/dev installs.
set -euo pipefail
KIT=${1:-.device-kit}
[ -d "$KIT/debs-opt" ] || { echo "kit_glslc: no $KIT/debs-opt (run ../shared/device/kit.sh first)" >&2; exit 2; }
MIRROR=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$MIRROR" ] || MIRROR=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
mkdir -p "$T/lists/partial" "$T/cache/archives/partial"
printf 'Types: deb\nURIs: %s\nSuites: forky\nComponents: main\nCheck-Valid-Until: no\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$MIRROR" > "$T/f.sources"
O="-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts=$T -oDir::State::Lists=$T/lists -oDir::Cache=$T/cache"
# shellcheck disable=SC2086
apt-get $O update >/dev/null 2>&1 || { echo "kit_glslc: could not read forky's package list" >&2; exit 1; }
mkdir -p "$T/debs"
# shellcheck disable=SC2086
(cd "$T/debs" && apt-get $O download glslc libshaderc1 >/dev/null 2>&1) \
  || { echo "kit_glslc: download of glslc/libshaderc1 failed" >&2; exit 1; }
rm -f "$KIT"/debs-opt/glslc_*.deb "$KIT"/debs-opt/libshaderc1_*.deb
cp "$T"/debs/*.deb "$KIT/debs-opt/"
ls "$KIT/debs-opt"
