#!/usr/bin/env bash
# call 10: the stage boundary as a VkEvent set after the stage and waited on before the next, against the pipeline barrier
set -u
source .device-kit/setup.sh >/dev/null 2>&1
t0=$(date +%s); W=/tmp/r10; mkdir -p $W; R=$PWD
say() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
pack() { (cd $W && tar -czf "$OUT/r10.tar.gz" *.txt *.json *.log *.patch 2>/dev/null); }
trap pack EXIT
mk() {  # name kind
  local d=/tmp/t_$1; rm -rf $d; mkdir -p $d
  tar --exclude=./.ab --exclude=./.device-kit --exclude=./build --exclude=./.git -cf - . | tar -xf - -C $d
  if [ "$2" = events ]; then python3 - $d/csrc/core/plan.c $d/csrc/core/vkfuncs.h <<'PY'
import sys
p, f = sys.argv[1], sys.argv[2]
s = open(f).read()
s = s.replace("    X(vkCmdDispatchIndirect) \\\n", "    X(vkCmdDispatchIndirect) \\\n    X(vkCreateEvent) \\\n    X(vkCmdSetEvent) \\\n    X(vkCmdResetEvent) \\\n    X(vkCmdWaitEvents) \\\n")
assert "vkCmdWaitEvents" in s
open(f, "w").write(s)
s = open(p).read()
old = """            hl_cmd_barrier_on(dev, p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);"""
new = """            {
                VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
                VkEvent ev;
                HL_VK(vkCreateEvent(dev->device, &eci, NULL, &ev)); /* experiment: never destroyed */
                ev_all[n_ev++] = ev;
                vkCmdSetEvent(p->cmd, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
                VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
                vkCmdWaitEvents(p->cmd, 1, &ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                1, &mb, 0, NULL, 0, NULL);
                dev->tel.barriers++;
            }"""
assert old in s
s = s.replace(old, new)
old2 = """    if (params_written) /* the words the host reads after the wait */"""
assert old2 in s
s = s.replace(old2, """    for (uint32_t e = 0; e < n_ev; e++) vkCmdResetEvent(p->cmd, ev_all[e], VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
""" + old2)
old3 = """    int params_written = 0;"""
s = s.replace(old3, """    static VkEvent ev_all[4096];
    uint32_t n_ev = 0;
""" + old3, 1)
open(p, "w").write(s)
PY
  fi
  (cd $d && diff -ru $R/csrc $d/csrc) > $W/$1.patch
  python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/wh_$1 $d > $W/build_$1.log 2>&1 || echo "build $1 failed"
}
for v in barrier events; do mk $v $v & done; wait
say built
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $W/gpu.txt
run() {  # wheel name
  python3 -m pip install -q --force-reinstall --no-deps /tmp/wh_$1/*.whl > /dev/null 2>&1 || { say "install $1 failed"; return; }
  cd $W
  timeout 90 python3 $R/.ab/step.py step_$2.json > step_$2.log 2>&1; say "$2: $(tail -1 step_$2.log)"; cd $R
}
run barrier barrier
run events events
run barrier barrier_again
run events events_again
say done
