#!/usr/bin/env bash
# Load-balanced bucket accumulation, packed "others" bases, cost-model windows (c = 20 for
# the dense 2^24 H query) and the multi-block scan, on an H200 (docs/benchmarks.md):
#   part a: GPU tests and MSM checks on the new kernels; resident MSMs with the previous
#           binary (.carry/gpu_bench_old) and the new one, the new one also with c forced
#           to 16; per-phase profile of the split sums at 2^22, old and new; the GPU backend
#           at 2^20, 2^22, 2^24 (resident and streamed, verified).
#   part b: cuzk vs SupraSeal C2 at 2^24, one partition per call (`cuzk bench prove`), then
#           ten partitions per proof: SupraSeal's create_proof_batch of 10 against cuzk's
#           engine (`cuzk bench batch --partitions 10`) on the same parameters file.
#   part c: after the batch-addition fix: checks, backend 2^22/2^24, longer engine run.
#   part d: part c's engine run with shape recording off.
# Usage: bash bench/h200-lb.sh a|b|c|d   (each part fits one 600 s device call;
#        SKIP_ENGINE=1 ends part b after SupraSeal's batch)
set -u -o pipefail
OUT=${OUT:-/tmp/cuzk-out}
PD=${PD:-/tmp/cuzk-params}
mkdir -p "$OUT" "$PD"
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=${RUST_LOG:-warn}
SEED=1668643435   # the engine's synthetic structure seed (0x63757a6b)
LOG=$OUT/part-$1.log
exec > >(tee "$LOG") 2>&1
t() { echo "== $* [$(date +%T)]"; }
case $1 in
a)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 200 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks' 
  for b in old new new16; do
    bin=.carry/gpu_bench; [ $b = old ] && bin=.carry/gpu_bench_old
    env=(); [ $b = new16 ] && env=(CUZK_GPU_MSM_C=16)
    t "msm g1 resident ($b)"; env "${env[@]}" timeout 120 $bin msm g1 --resident --runs 3 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-200
  done
  for b in old new; do
    bin=.carry/gpu_bench; [ $b = old ] && bin=.carry/gpu_bench_old
    t "msm g2 resident ($b)"; timeout 120 $bin msm g2 --resident --runs 3 --seed 5 20 22 2>&1 | grep '^{' | cut -c1-200
  done
  for b in old new; do
    bin=.carry/gpu_bench; [ $b = old ] && bin=.carry/gpu_bench_old
    t "profile backend 22 ($b)"
    CUZK_GPU_PROFILE=1 RUST_LOG=info timeout 120 $bin backend --runs 1 --seed 7 22 > "$OUT/profile-$b.log" 2>&1
    grep -E '^\{' "$OUT/profile-$b.log" | cut -c1-600
  done
  t "backend 20 22 24 (new)"; timeout 240 .carry/gpu_bench backend --runs 3 --seed 7 20 22 24 2>&1 | grep '^{' | cut -c1-900
  ;;
b)
  P=$PD/cuzk-synthetic-63757a6b-24.params
  t "bench prove 24 vs supraseal"
  timeout 330 .carry/cuzk bench prove --backend gpu --compare supraseal --log-n 24 --reps 2 \
    --seed $SEED --params-dir "$PD" --supraseal-bin .carry/cuzk-supraseal-bench 2>&1 | grep -vE "^\s*$" | tail -25
  t "supraseal batch 10 at 2^24"
  printf 'batch 10\nquit\n' | timeout 200 .carry/cuzk-supraseal-bench --params "$P" --log-n 24 --seed $SEED 2>"$OUT/ss-batch.err"
  tail -2 "$OUT/ss-batch.err"
  [ "${SKIP_ENGINE:-0}" = 1 ] && { t done; exit 0; }
  t "cuzk engine: 10-partition proofs at 2^24"
  timeout 200 .carry/cuzk bench batch --log-n 24 --partitions 10 --count 4 --concurrency 2 \
    --param-dir "$PD" --synthesis-workers 14 --gpu-workers 2 2>&1 | grep -vE "^\s*$" | tail -30
  ;;
c)
  # After the batch-addition fix (n = 0 ones) and the parallel compaction: checks again,
  # the backend at 2^22 and 2^24, then the engine on 10-partition proofs for longer.
  P=$PD/cuzk-synthetic-63757a6b-24.params
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 200 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "backend 22 24"; timeout 200 .carry/gpu_bench backend --runs 3 --seed 7 22 24 2>&1 | grep '^{' | cut -c1-900
  t "gen params 24"; timeout 120 .carry/cuzk gen params --log-n 24 --seed $SEED --out "$P" 2>&1 | tail -1
  t "cuzk engine: 10-partition proofs at 2^24"
  timeout 200 .carry/cuzk bench batch --log-n 24 --partitions 10 --count 6 --concurrency 2 \
    --param-dir "$PD" --synthesis-workers 14 --gpu-workers 2 2>&1 | grep -vE "^\s*$" | tail -30
  ;;
d)
  # The engine with shape recording off (plain synthesis for every partition), the same
  # 10-partition run as part c: does recording save CPU work on a 16-core host?
  P=$PD/cuzk-synthetic-63757a6b-24.params
  printf '[engine]\nrecorded_r1cs_budget_bytes = 0\n' > /tmp/cuzk-norecord.toml
  t "gen params 24"; timeout 120 .carry/cuzk gen params --log-n 24 --seed $SEED --out "$P" 2>&1 | tail -1
  t "cuzk engine, recording off: 10-partition proofs at 2^24"
  timeout 200 .carry/cuzk bench batch --log-n 24 --partitions 10 --count 6 --concurrency 2 \
    --config /tmp/cuzk-norecord.toml --param-dir "$PD" --synthesis-workers 14 --gpu-workers 2 \
    2>&1 | grep -vE "^\s*$" | tail -4
  ;;
esac
t done
