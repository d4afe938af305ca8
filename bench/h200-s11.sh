#!/usr/bin/env bash
# Session of 2026-11-30 14:00 UTC on an H200 (docs/benchmarks.md):
#   part a: Nsight Compute profile of the G1 bucket accumulation and the pair-round kernels
#           of one resident 2^22 G1 MSM (stall reasons, occupancy, pipe use), and the
#           head-to-head against SupraSeal C2 at 2^22 for three witness shapes: the
#           PoRep-like default, every aux value a field element (--bit-fraction 0), and that
#           with every aux variable in B as well (--b-density 1). SupraSeal's process CPU time
#           is printed by a wrapper (bash `times`).
#   part b: the same head-to-head shapes at 2^24.
#   part c: warp stall reasons (ncu metrics) of the G1 bucket accumulation and the pair
#           backward kernel, and resident G1 MSMs at 2^22/2^24 with experimental variants of
#           the accumulation (CUZK_GPU_ACC: lb4 = at most 128 registers, ool = Fp products
#           out of line, ool4 = both), pair rounds off and on.
#           (Part c ran an uncommitted build with those variants in msm.cu; the winner, ool,
#           became ec.cuh's fmul in the next commit.)
#   part d: Fp products out of line in the point formulas and the pair rounds: GPU tests,
#           MSM checks (default and 3 pair rounds forced), G1 MSMs with pair rounds off and
#           on (profiled), the backend at 2^20/2^22/2^24 with the 2^24 two-worker overlap.
#   part e: as committed (products out of line, pair rounds off): the backend at 2^20/2^22/
#           2^24 with the 2^24 two-worker overlap, and the three-way head-to-head at 2^24 on
#           the PoRep-like default shape (cuzk GPU vs SupraSeal C2 vs cuzk CPU).
#   part f: the head-to-head against SupraSeal C2 for the dense shapes: 2^22 with the three
#           shapes of part a again, and 2^24 with --bit-fraction 0.
#   part g: window widths once more with the faster additions: resident G1 MSMs at 2^22 and
#           2^24 with every c from 16 to 20 forced (CUZK_GPU_MSM_C).
#   part h: window widths limited to top windows of at least 8 bits: MSM checks (also with
#           3 pair rounds forced), and G1 MSMs at 2^14, 2^16, 2^18 with the new choice
#           against the old one forced.
# Usage: bash bench/h200-s11.sh a|b|c|d|e|f|g|h   (each fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
h2h() { # log_n, then shape flags
  local lg=$1; shift
  t "bench prove $lg ${*:-default shape}: gpu vs supraseal"
  local s=$(date +%s)
  timeout ${H2H_TIMEOUT:-250} .carry/cuzk bench prove --backend gpu --compare supraseal --log-n $lg --reps 2 \
    --seed 1668643435 --params-dir /tmp/cuzk-params --supraseal-bin $SS "$@" 2>&1 \
    | grep -E '^\{|supraseal process|^[0-9]+m|generated' | cut -c1-2000
  echo "wall $(( $(date +%s) - s )) s"
}
case $1 in
a)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t "ncu: accumulate and pair kernels of one 2^22 G1 MSM"
  which ncu || ls /opt/nvidia/nsight-compute/*/ncu
  NCU=$(which ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  timeout 200 $NCU --clock-control none --set full \
    -k regex:'msm_accumulate_g1|pair_backward_g1|pair_forward_g1' -c 3 \
    .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 > $OUT/ncu-22.txt 2>&1
  echo "ncu rc $?"; grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc Active|No Eligible|Stall|L1/TEX Hit|L2 Hit|Memory Throughput|Compute \(SM\)" $OUT/ncu-22.txt | head -80
  h2h 22
  h2h 22 --bit-fraction 0
  h2h 22 --bit-fraction 0 --b-density 1
  ;;
c)
  NCU=$(which ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
  for v in default ool; do
    t "ncu stall reasons, accumulate $v and pair backward, 2^22"
    CUZK_GPU_ACC=$v timeout 120 $NCU --clock-control none --metrics "$STALLS,smsp__issue_active.avg.per_cycle_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread" \
      -k regex:'msm_accumulate_g1|pair_backward_g1' -c 2 \
      .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 > $OUT/ncu-stalls-$v.txt 2>&1
    echo "ncu rc $?"
    grep -E "^  [a-z_0-9]+ \(|registers|issue_active|warps_active|stalled" $OUT/ncu-stalls-$v.txt \
      | awk '$NF+0 >= 0.2 || /\(|registers|issue_active|warps_active/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110
  done
  for v in default lb4 ool ool4; do
    for pair in 0 default; do
      env=(CUZK_GPU_ACC=$v); [ $pair = 0 ] && env+=(CUZK_GPU_MSM_PAIR=0)
      t "msm g1 resident, accumulate $v, pair rounds $pair"
      env "${env[@]}" CUZK_GPU_PROFILE=1 timeout 100 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 22 24 2>&1 | grep -E '^\{|profile' | cut -c1-400
    done
  done
  ;;
d)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm checks, 3 pair rounds forced"
  CUZK_GPU_MSM_PAIR=3 timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  for pair in 0 1 2; do
    t "msm g1 resident, pair rounds $pair"
    CUZK_GPU_MSM_PAIR=$pair timeout 100 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
    CUZK_GPU_MSM_PAIR=$pair CUZK_GPU_PROFILE=1 timeout 60 .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 24 2>&1 | grep -E 'profile' | tail -1
  done
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 240 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  ;;
e)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 200 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  t "ncu stall reasons of the accumulation and running sums, 2^22"
  NCU=$(which ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
  STALLS='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
  timeout 60 $NCU --clock-control none --metrics "$STALLS,smsp__issue_active.avg.per_cycle_active,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread" \
    -k regex:'msm_accumulate_g1|msm_segments_g1' -c 2 \
    .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 > $OUT/ncu-stalls-e.txt 2>&1
  grep -E "^  [a-z_0-9]+ \(|registers|issue_active|warps_active|stalled" $OUT/ncu-stalls-e.txt \
    | awk '$NF+0 >= 0.2 || /\(|registers|issue_active|warps_active/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | cut -c1-110
  t "bench prove 24: gpu vs supraseal vs cpu"
  timeout 330 .carry/cuzk bench prove --backend gpu --compare supraseal,cpu --log-n 24 --reps 2 \
    --seed 1668643435 --params-dir /tmp/cuzk-params --supraseal-bin $SS 2>&1 \
    | grep -E '^\{|supraseal process|^[0-9]+m|generated' | cut -c1-2000
  ;;
f)
  H2H_TIMEOUT=280 h2h 24 --bit-fraction 0
  H2H_TIMEOUT=100 h2h 22
  H2H_TIMEOUT=100 h2h 22 --bit-fraction 0
  H2H_TIMEOUT=140 h2h 22 --bit-fraction 0 --b-density 1
  ;;
g)
  for c in 16 17 18 19 20; do
    t "msm g1 resident, c = $c"
    CUZK_GPU_MSM_C=$c timeout 60 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 22 24 2>&1 | grep '^{' | cut -c1-300
  done
  ;;
h)
  t msm checks; timeout 60 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm checks, 3 pair rounds forced (pair.cu through fmul/fsqr since the review commit)"
  CUZK_GPU_MSM_PAIR=3 timeout 60 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm g1 resident, new widths"
  timeout 60 .carry/gpu_bench msm g1 --resident --runs 5 --seed 5 14 16 18 2>&1 | grep '^{' | cut -c1-300
  for lc in "14 10" "16 12" "18 14"; do
    set -- $lc
    t "msm g1 resident 2^$1, old width c = $2"
    CUZK_GPU_MSM_C=$2 timeout 30 .carry/gpu_bench msm g1 --resident --runs 5 --seed 5 $1 2>&1 | grep '^{' | cut -c1-300
  done
  ;;
b)
  H2H_TIMEOUT=280 h2h 24 --bit-fraction 0
  ;;
esac
