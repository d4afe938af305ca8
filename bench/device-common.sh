# Shared set-up of the device scripts (bench/h200-s10.sh on): sourced with the part
# name as $1. Logs to $OUT/part-$1.log, points the NVRTC cache into .carry, and defines
#   t MSG...                 a timestamped heading;
#   h2h TIMEOUT LOG_N FLAGS  `cuzk bench prove --backend gpu` against the SupraSeal C2
#                            baseline (.carry/cuzk-supraseal-bench), whose process CPU
#                            time is printed on exit;
#   gpu_info                 the GPU's name, driver and memory;
#   gpu_checks               GPU tests, NTT checks against the CPU to 2^16 (with the
#                            quotient), MSM checks in G1 and G2.
set -u -o pipefail
OUT=${OUT:-/tmp/cuzk-out}
mkdir -p "$OUT"
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=${RUST_LOG:-warn}
LOG=$OUT/part-$1.log
exec > >(tee "$LOG") 2>&1
t() { echo "== $* [$(date +%T)]"; }
SS=/tmp/supraseal-timed.sh
printf '#!/usr/bin/env bash\n%s/.carry/cuzk-supraseal-bench "$@"\nrc=$?\necho "supraseal process times (user sys / children):" >&2\ntimes >&2\nexit $rc\n' "$PWD" > $SS
chmod +x $SS
h2h() {
  local to=$1 lg=$2; shift 2
  t "bench prove $lg ${*}"
  local s=$(date +%s)
  timeout $to .carry/cuzk bench prove --backend gpu --log-n $lg --reps 2 \
    --seed 1668643435 --params-dir /tmp/cuzk-params --supraseal-bin $SS "$@" 2>&1 \
    | grep -E '^\{|supraseal process|^[0-9]+m|generated' | cut -c1-2000
  echo "wall $(( $(date +%s) - s )) s"
}
gpu_info() { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; }
gpu_checks() {
  t gpu tests; timeout 150 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror"
  t "ntt checks to 2^16 against the CPU"
  timeout 120 .carry/gpu_bench ntt --check --check-max-lg 16 --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks|rror'
  for g in g1 g2; do
    t "msm checks $g"; timeout 90 .carry/gpu_bench msm $g --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks|rror'
  done
}
