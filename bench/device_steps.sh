#!/usr/bin/env bash
# One device call's worth of bench/reproduce.sh parts for #26, and the carry they need.
#
#   bench/device_steps.sh prepare   # on the dev machine: .carry/next (this work tree's
#                                   # build), .carry/cache (its kernels for sm_90),
#                                   # .carry/cuzk-supraseal-bench; about 7 min from a warm
#                                   # cargo cache, 20 from a cold one
#   bench/device_steps.sh           # on the device, from the repository root
#
# Carry: .carry/next .carry/cache .carry/cuzk-supraseal-bench (about 38 MB), and .carry/o
# (an older `cuzk`, OLD of the `s` step) when there is one.
#
# STEPS picks the steps, in order (default "a b" on an H200, "c s" on other cards):
#   a  the full card: params32, then BATCH32_COUNT (here 6) proofs from
#      BATCH32_CONCURRENCY (here 3) clients (#26: ≤ 19.3 s per proof, RSS ≤ 64 GiB);
#      where its calls wait shows in its host steps (bench/host_steps.py on the timeline):
#      CUZK_GPU_TRACE traces only the streamed SRS's ring, not the full card's proves
#   b  e2e24, the 2^24 end-to-end head to head against SupraSeal C2 (≥ 13.06×)
#   c  the GPU test binaries
#   s  the small cards: reproduce.sh's cases (SMALL_CASES, by default 24 and 16 GiB free, the
#      new build), SMALL_COUNT (here 3, to leave room for c in one call) proofs each
# reproduce.sh's other variables pass through as they are. After `a` on an H200, a second
# call within the machine's idle release (`STEPS=s SMALL_CASES=NEW@24 SMALL_COUNT=4`)
# measures the 24 GiB card on the H200's compute, #26's own terms; params32 keeps the
# parameters the first call wrote.
set -u -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" = prepare ]; then
  set -e
  bench/reproduce.sh build .carry/next
  .ci/nvrtc_dir >/dev/null ||
    python3 -m pip install --quiet --break-system-packages nvidia-cuda-nvrtc==13.0.88 2>/dev/null ||
    python3 -m pip install --quiet nvidia-cuda-nvrtc==13.0.88
  lib=$(.ci/nvrtc_dir)
  LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} XDG_CACHE_HOME=$PWD/.carry/cache \
    .carry/next/cuzk bench gpu compile --arch sm_90
  [ -x .carry/cuzk-supraseal-bench ] || bench/supraseal/build.sh
  du -sh .carry/*
  exit 0
fi

N=.carry/next
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader
echo "cores $(nproc), host $(free -g | awk '/Mem:/ {print $2}') GiB, $(df -h . | tail -1)"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) def="a b" ;; *) def="c s" ;; esac
STEPS=${STEPS:-$def}
old=$N
[ -x .carry/o/cuzk ] && old=.carry/o
echo "== steps: $STEPS on $card, build $(cat $N/COMMIT)"
for s in $STEPS; do
  echo "== step $s $(date -u +%H:%M:%S)"
  case $s in
    a) BATCH32_COUNT=${BATCH32_COUNT:-6} BATCH32_CONCURRENCY=${BATCH32_CONCURRENCY:-3} \
         bench/reproduce.sh $N $N params32 batch32 ;;
    b) bench/reproduce.sh $N $N e2e24 ;;
    c) bench/reproduce.sh $N $N gputests ;;
    s) SMALL_COUNT=${SMALL_COUNT:-3} bench/reproduce.sh $old $N params32 small ;;
    *) echo "unknown step $s" >&2 ;;
  esac
  echo "== step $s done $(date -u +%H:%M:%S)"
done
