#!/usr/bin/env bash
# On a leased GPU machine (device tool), before anything else touches it: build
# a wheel with the kit's SDK kept out of / (glslc, headers and the loader only
# under /opt/helios-kit), then install it in a bare environment (no SDK on
# PATH, no headers, no loader in /) and record what it needs to run: first
# nothing added, then the Vulkan loader alone, then libglvnd too.
# Usage: bash tools/wheel_check.sh   (carry .device-kit and .whl; writes $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
REPO=$(pwd); K=$REPO/.device-kit; SDK=/opt/helios-kit
mkdir -p $SDK
for f in "$K"/debs-opt/*.deb "$K"/debs-root/libvulkan1_*.deb; do dpkg -x "$f" $SDK; done
cp -a $SDK/usr/lib/x86_64-linux-gnu/libshaderc.so.1* $SDK/usr/lib/x86_64-linux-gnu/libSPIRV-Tools*.so* /usr/local/lib/ 2>/dev/null
ldconfig
ln -sfn $SDK/usr/lib/x86_64-linux-gnu/libvulkan.so.1 $SDK/usr/lib/libvulkan.so
echo "== the bare image"
ldconfig -p | grep -E "libvulkan|libGLdispatch|libGLX\.so" || echo "no libvulkan, no libglvnd in the linker cache"
ls /usr/local/nvidia/share/vulkan/icd.d/ /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>&1 | head
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
echo "== build the wheel (SDK under $SDK only): tools/build_wheel.sh, auditwheel from the carried .whl"
( export VULKAN_SDK=$SDK/usr PATH=$SDK/usr/bin:$PATH CMAKE_PREFIX_PATH=$SDK/usr CPATH=$SDK/usr/include PYTHONPATH=/tmp/site
  HELIOS_WHEEL_LINKS=$REPO/.whl HELIOS_WHEEL_TOOLS=/tmp/wheel-tools bash tools/build_wheel.sh /tmp/dist ) \
  > /tmp/wheel.log 2>&1 || { tail -30 /tmp/wheel.log; exit 1; }
sed -n '/is consistent/,$p' /tmp/wheel.log
ls -la /tmp/dist
W=$(ls /tmp/dist/helios_vulkan-*.whl)
mkdir -p /tmp/unz && (cd /tmp/unz && python3 -m zipfile -e "$W" .)
SO=$(ls /tmp/unz/helios/_helios*.so)
echo "== $SO needs"; objdump -p "$SO" | grep NEEDED
echo "glibc symbol versions:"; objdump -T "$SO" | grep -o "GLIBC_[0-9.]*" | sort -uV | tr '\n' ' '; echo
# The image's own environment stays (its LD_LIBRARY_PATH is where the NVIDIA
# driver's libraries, the Vulkan ICD among them, live); the SDK's does not.
echo "image LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
BARE="env -i HOME=/tmp PATH=/opt/torch/.venv/bin:/usr/bin:/bin XDG_RUNTIME_DIR=/tmp LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
$BARE bash -c "command -v glslc || echo 'no glslc on PATH'; ls /usr/include/vulkan 2>/dev/null | head -1 || true; [ -d /usr/include/vulkan ] || echo 'no Vulkan headers'"
# The image's Python environment (numpy, torch, pytest) plus the wheel, nothing else:
# the README's one command.
$BARE python3 -m pip install -q --no-deps "$W" && echo "pip install --no-deps $(basename "$W"): ok"
echo "== 1. nothing added"
$BARE bash -c "cd /tmp && python3 -m helios info 2>&1 | tail -2; echo rc=\${PIPESTATUS[0]}"
echo "== 2. the Vulkan loader (libvulkan1) only"
dpkg -x "$K"/debs-root/libvulkan1_*.deb /; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
$BARE bash -c "cd /tmp && python3 -m helios info 2>&1 | head -3; echo rc=\${PIPESTATUS[0]}"
$BARE VK_DRIVER_FILES=$ICD bash -c "cd /tmp && python3 -m helios info 2>&1 | head -3; echo rc=\${PIPESTATUS[0]}"
echo "== 3. + libglvnd (libGLdispatch for the NVIDIA ICD)"
dpkg -x "$K"/debs-root/libglvnd0_*.deb /; ldconfig
$BARE bash -c "cd /tmp && python3 -m helios info 2>&1 | head -3; echo rc=\${PIPESTATUS[0]}"
$BARE VK_DRIVER_FILES=$ICD bash -c "cd /tmp && python3 -m helios info 2>&1 | head -3; echo rc=\${PIPESTATUS[0]}"
echo "== what the ICD library still misses"
ICDLIB=$(python3 -c "import json; print(json.load(open('$ICD'))['ICD']['library_path'])" 2>/dev/null)
echo "ICD library: $ICDLIB"
$BARE bash -c "ldd \$(for d in \${LD_LIBRARY_PATH//:/ }; do [ -e \$d/$ICDLIB ] && echo \$d/$ICDLIB && break; done) 2>&1 | grep 'not found' || echo 'nothing missing'"
$BARE VK_LOADER_DEBUG=error,driver bash -c "cd /tmp && python3 -m helios info 2>&1 | grep -iE 'error|fail|nvidia' | head -5"
echo "== 4. one more glvnd package at a time, until the device opens"
for pkg in libglx0 libegl1 libgl1 libgles2 libopengl0; do
  if $BARE bash -c "cd /tmp && python3 -m helios info > /dev/null 2>&1"; then break; fi
  dpkg -x "$K"/debs-root/${pkg}_*.deb /; ldconfig
  $BARE bash -c "cd /tmp && python3 -m helios info 2>&1 | head -1; echo \"+ $pkg: rc=\${PIPESTATUS[0]}\""
done
echo "== bench and GPU tests from the wheel"
$BARE VK_DRIVER_FILES=$ICD bash -c "cd /tmp && timeout 120 python3 -m helios bench --suite=cuda --shapes=4096x4096x4096 --iters=30 --repeats=1 2>&1 | tail -4"
$BARE VK_DRIVER_FILES=$ICD bash -c "cd $REPO && timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_hardware.py tests/test_identity.py tests/test_gemm.py tests/test_correctness.py tests/test_attention.py -k \"not gpu_head_dims\" 2>&1 | tail -3"
$BARE VK_DRIVER_FILES=$ICD bash -c "cd /tmp && timeout 120 python3 -m helios bench --workload=attention --shapes=32x8x512x64,1x32x4096x128 --iters=30 2>&1 | grep -E '^\\| [0-9]'"
cp "$W" "$OUT/" 2>/dev/null || true
