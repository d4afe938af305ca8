#!/usr/bin/env bash
# One device run for issues #3, #5 and #6 on an H200 (see docs/benchmarks.md):
# GPU tests, 2^24 parameters made on the GPU by `cuzk gen params`, `cuzk bench batch`
# over 2^24 synthetic partitions with 2 GPU workers (efficiency + timeline SVG), the
# SRS tier the engine reports afterwards (VRAM), and the 2 KiB PoRep C2 proved on the GPU and
# checked by filecoin-proofs. Binaries come from .carry/ (cuzk, gpu_tests).
set -u -o pipefail
BIN=${CUZK:-.carry/cuzk}
OUT=${OUT:-/tmp/cuzk-out}
PD=${PD:-/tmp/cuzk-params}
mkdir -p "$OUT" "$PD"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.carry/cache}
export RUST_LOG=${RUST_LOG:-info}
export FIL_PROOFS_PARAMETER_CACHE=$PD FIL_PROOFS_PARENT_CACHE=/tmp/cuzk-parents
SEED=1668643435   # the engine's synthetic structure seed (0x63757a6b)
step() { # name limit_s command...
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" > >(tee "$OUT/$name.out") 2> "$OUT/$name.err"
  local rc=$?
  echo "== $name rc=$rc in $(( $(date +%s) - t0 )) s"
  tail -3 "$OUT/$name.err"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/smi.txt"
step gpu_tests 90 .carry/gpu_tests --test-threads=1
step gen_params_24 120 "$BIN" gen params --log-n 24 --seed $SEED --out "$PD/cuzk-synthetic-63757a6b-24.params"
# 40 partitions; 10 clients keep 20 partitions in flight so that 14 synthesis workers
# (~10-12 s per 2^24 partition each) can feed one GPU proving one every ~0.9 s.
step bench_batch_24 240 "$BIN" bench batch --log-n 24 --partitions 2 --count 20 --concurrency 10 \
  --param-dir "$PD" --synthesis-workers 14 --gpu-workers 2 --timeline "$OUT/timeline-2e24.svg"
step gen_params_porep 200 "$BIN" gen params --kind porep --sector-size 2KiB --dir "$PD"
step gen_sector 200 "$BIN" gen sector --sector-size 2KiB --out /tmp/cuzk-sector
step prove_porep_gpu 200 "$BIN" prove --kind porep --sector /tmp/cuzk-sector --param-dir "$PD" --backend gpu
df -h /tmp | tail -1
