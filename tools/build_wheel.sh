#!/usr/bin/env bash
# tools/build_wheel.sh [OUTDIR]  — a manylinux wheel of this tree for the Python
# that runs it (`make wheel` runs it in the dev root; on any machine with a
# Vulkan SDK it makes one for that machine's Python).
#
# 1. pip wheel (kernels compiled in; the module needs only libc, the Vulkan
#    loader is opened at run time; no cuBLASLt module, see below);
# 2. auditwheel show: the manylinux policy the module's ELF symbols allow (it
#    fails the build if the module needs a library outside the policy);
# 3. that platform tag on the file (`python3 -m wheel tags`; nothing to graft,
#    so no `auditwheel repair` and no patchelf).
# auditwheel comes from PyPI into build/wheel-tools (pip --target), or from wheels in
# $HELIOS_WHEEL_LINKS (a folder) where there is no network (the GPU machines).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
TOOLS=${HELIOS_WHEEL_TOOLS:-build/wheel-tools}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Without the optional cuBLASLt module: it links the CUDA toolkit's libraries,
# which no manylinux policy allows (the torch reference serves instead; a source
# build where the toolkit is keeps it).
python3 -m pip wheel --no-build-isolation --no-deps -C cmake.define.HELIOS_CUBLAS=OFF . -w "$TMP" \
  >"$TMP/build.log" 2>&1 ||
  { tail -40 "$TMP/build.log" >&2; echo "build_wheel: pip wheel failed" >&2; exit 1; }
RAW=$(ls "$TMP"/helios_vulkan-*.whl)
auditwheel() { PYTHONPATH="$TOOLS${PYTHONPATH:+:$PYTHONPATH}" python3 -m auditwheel "$@"; }
if ! auditwheel --version >/dev/null 2>&1; then   # a --target install: no venv module needed
  python3 -m pip install -q --break-system-packages --target "$TOOLS" \
    ${HELIOS_WHEEL_LINKS:+--no-index --find-links "$HELIOS_WHEEL_LINKS"} auditwheel
fi
SHOW=$(auditwheel show "$RAW" 2>&1) || { echo "$SHOW" >&2; exit 1; }
echo "$SHOW" | sed -n '/is consistent/,$p'
TAG=$(echo "$SHOW" | tr '\n' ' ' | grep -o 'following platform tag: *"[^"]*"' | head -1 | cut -d'"' -f2)
case "$TAG" in
  manylinux_*) ;;
  *) echo "build_wheel: auditwheel gave no manylinux tag for $(basename "$RAW")" >&2; exit 1 ;;
esac
python3 -m wheel tags --platform-tag "$TAG" --remove "$RAW" >/dev/null
mkdir -p "$OUT"
mv "$TMP"/helios_vulkan-*.whl "$OUT"/
ls "$OUT"/helios_vulkan-*"$TAG"*.whl
PY=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
echo "build_wheel: a wheel for CPython $PY only (pip refuses it in another Python); for another Python," \
  "run tools/build_wheel.sh with that Python where glslc and Vulkan >= 1.3.255 headers are" >&2
