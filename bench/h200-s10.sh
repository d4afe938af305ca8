#!/usr/bin/env bash
# Session of 2026-11-30 11:00 UTC on an H200 (docs/benchmarks.md):
#   part v: the device checks of commits 95c7226 and 6861da6 (shared msm_others/check_split,
#           classification through scan_exclusive, never run on a device before), the GPU
#           backend at 2^20/2^22/2^24 with the 20-partition two-worker overlap at 2^24, and
#           synthesis on the host's 16 cores (plain against recorded).
#   part p: batch-affine pair rounds before the G1 bucket accumulation (pair.cu): GPU tests,
#           MSM checks, G1 MSMs with the rounds off (CUZK_GPU_MSM_PAIR=0) and on at 2^20,
#           2^22, 2^24, the per-phase profile of one 2^24 MSM, the backend at 2^20/2^22/2^24
#           with the 2^24 overlap.
#   part q: per-kernel profile of the pair rounds of one 2^24 G1 MSM, with 1, 2 and 4 rounds
#           and none.
#   part f: the pair rounds as committed (two rounds from 2^21 points): GPU tests, MSM checks
#           (also with three rounds forced at every size), G1 MSMs without and with the
#           rounds, the backend at 2^20/2^22/2^24 with the 2^24 overlap.
#   part g: the GPU backend at 2^26 (parameters made on the device, in memory).
#   part h: head to head at 2^24 with the pair rounds: cuzk GPU vs SupraSeal C2 vs cuzk CPU
#           (`cuzk bench prove`, parameters made on the device).
#   part r: after moving msm.rs into msm/ (no kernel change but comments): GPU tests, MSM
#           checks (default and 3 rounds forced), one resident 2^22 and 2^24 G1 MSM.
# Usage: bash bench/h200-s10.sh v|p|q|f|g|h|r   (each fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
case $1 in
v)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 150 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 260 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  t "synthesis on 16 cores"; timeout 60 .carry/cuzk bench synth --log-n 22 --reps 2 2>&1 | tail -4
  ;;
p)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 150 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  for pair in 0 1; do
    t "msm g1 resident, pair rounds $pair"
    CUZK_GPU_MSM_PAIR=$pair timeout 100 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
  done
  t "profile of one 2^24 G1 MSM"
  CUZK_GPU_PROFILE=1 timeout 60 .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 24 2>&1 | grep -E 'profile' | tail -2
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 240 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  ;;
q)
  t msm checks; timeout 150 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  for pair in ${ROUNDS:-0 1 2 4}; do
    t "profile of one 2^24 G1 MSM, at most $pair pair rounds"
    CUZK_GPU_MSM_PAIR=$pair CUZK_GPU_PROFILE=1 timeout 60 .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 24 2>&1 | grep -E 'profile|"ms"' | cut -c1-400
  done
  ;;
f)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm checks, 3 pair rounds forced"
  CUZK_GPU_MSM_PAIR=3 timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  for pair in 0 default; do
    env=(); [ $pair = 0 ] && env=(CUZK_GPU_MSM_PAIR=0)
    t "msm g1 resident, pair rounds $pair"
    env "${env[@]}" timeout 100 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
  done
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 240 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1200
  ;;
g)
  t "backend 26"; timeout 500 .carry/gpu_bench backend --runs 2 --seed 11 26 2>&1 | grep '^{' | cut -c1-1200
  ;;
h)
  t "bench prove 24: gpu vs supraseal vs cpu"
  timeout 520 .carry/cuzk bench prove --backend gpu --compare supraseal,cpu --log-n 24 --reps 2 \
    --seed 1668643435 --params-dir /tmp/cuzk-params --supraseal-bin .carry/cuzk-supraseal-bench 2>&1 \
    | grep -vE "^\s*$" | tail -25
  ;;
r)
  t gpu tests; timeout 120 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t msm checks; timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm checks, 3 pair rounds forced"
  CUZK_GPU_MSM_PAIR=3 timeout 100 .carry/gpu_bench msm g1 --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks'
  t "msm g1 resident"; timeout 100 .carry/gpu_bench msm g1 --resident --runs 3 --seed 5 22 24 2>&1 | grep '^{' | cut -c1-300
  ;;
esac
t done
