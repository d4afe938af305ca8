#!/usr/bin/env bash
# Session of 2026-11-30 22:00 UTC on an H200 (docs/benchmarks.md):
#   part p: where the time goes now: per-phase device profile of resident G1 MSMs at 2^22 and
#           2^24 (the H query's shape), and of one resident backend prove at 2^24 with every
#           MSM's phases (PoRep-like shape).
#   part t: window tables for the resident H query (fixed-base precomputation): GPU tests,
#           MSM checks in G1 (with the table checks) and G2, the table MSM against the
#           plain one at 2^20/2^22/2^24 and its phases at 2^24, the backend at 2^24 with the
#           two-worker overlap.
#   part u: a lone prove also starts the quotient once a is uploaded (b and c follow while
#           a's transforms run): GPU tests, MSM checks (the table checks with the arena
#           fix), the backend at 2^24 with the two-worker overlap, the head-to-head at 2^24
#           against SupraSeal C2 (PoRep-like default shape).
#   part d: the head-to-head at 2^24 on the dense shape (--bit-fraction 0).
#   part x: the backend at 2^26 (parameters made on the device into host memory), with
#           the window table the default budget allows.
#   part f: the final binaries: GPU tests, then #4's head-to-head in one run, cuzk GPU vs
#           SupraSeal C2 vs the cuzk CPU backend at 2^20, 2^22 and 2^24 (PoRep-like shape).
#   part r: the last commits' binaries (a warning when the table goes unused; a failed table
#           build given up and logged, the prove going on): GPU tests,
#           the backend at 2^22 with the two-worker overlap.
#   part k: reductions of 4 points per launch instead of 16 (.carry/gpu_bench_old: 24fde24):
#           GPU tests, MSM checks, the reduce phases of G1 and G2 MSMs and the backend at
#           2^20/2^22 with both binaries, the backend at 2^24 with the new one.
# Usage: bash bench/h200-s14.sh p|t|u|d|x|f|r|k   (each part fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
gpu_info
case $1 in
p)
  t "profile: resident G1 MSM 22 24"
  CUZK_GPU_PROFILE=1 timeout 150 .carry/gpu_bench msm g1 --resident --runs 1 --seed 5 22 24 2>&1 | grep -v '^$' | cut -c1-600
  t "profile: resident G2 MSM 22"
  CUZK_GPU_PROFILE=1 timeout 100 .carry/gpu_bench msm g2 --resident --runs 1 --seed 5 22 2>&1 | grep -v '^$' | cut -c1-600
  t "profile: backend 24"
  CUZK_GPU_PROFILE=1 timeout 200 .carry/gpu_bench backend --runs 1 --seed 7 24 2>&1 | grep -v '^$' | cut -c1-1400
  ;;
t)
  gpu_checks
  t "msm g1 plain vs window table 20 22 24"
  timeout 150 .carry/gpu_bench msm g1 --resident --table --runs 3 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-600
  t "profile: table msm 24"
  CUZK_GPU_PROFILE=1 timeout 100 .carry/gpu_bench msm g1 --resident --table --runs 1 --seed 5 24 2>&1 | grep -E 'profile|msm_g1_table' | cut -c1-600
  t "backend 24 with the table, overlap 20 partitions x 2 workers"
  RUST_LOG=cuzk_gpu=info timeout 200 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 24 2>&1 | grep -E '^\{|window table|resident in vram' | cut -c1-1400
  ;;
u)
  gpu_checks
  t "backend 24, overlap 20 partitions x 2 workers"
  timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 24 2>&1 | grep '^{' | cut -c1-1400
  h2h 280 24 --compare supraseal
  ;;
d)
  h2h 500 24 --compare supraseal --bit-fraction 0
  ;;
f)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror"
  h2h 70 20 --compare supraseal,cpu
  h2h 130 22 --compare supraseal,cpu
  h2h 330 24 --compare supraseal,cpu
  ;;
r)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror|WARN"
  t "backend 22, overlap 20 partitions x 2 workers"
  RUST_LOG=warn timeout 120 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 22 2>&1 | grep -E '^\{|WARN' | cut -c1-1400
  ;;
k)
  t gpu tests; timeout 100 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "test result|panicked|rror"
  for g in g1 g2; do
    t "msm checks $g"; timeout 90 .carry/gpu_bench msm $g --check --runs 1 10 2>&1 | grep -E '"ok":false|^\{"checks|rror'
  done
  for b in gpu_bench_old gpu_bench; do
    t "$b: profile msm g1 19 24, g2 19"
    CUZK_GPU_PROFILE=1 timeout 60 .carry/$b msm g1 --resident --runs 1 --seed 5 19 24 2>&1 | grep -E 'profile' | sed -n '2p;4p' | cut -c1-400
    CUZK_GPU_PROFILE=1 timeout 60 .carry/$b msm g2 --resident --runs 1 --seed 5 19 2>&1 | grep -E 'profile' | sed -n '2p' | cut -c1-400
    t "$b: backend 20 22"
    timeout 100 .carry/$b backend --runs 3 --seed 7 20 22 2>&1 | grep '"residency":"resident"' | cut -c1-900
  done
  t "gpu_bench: backend 24"
  timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 24 2>&1 | grep '"residency":"resident"' | cut -c1-900
  ;;
x)
  t "backend 26 (parameters made on the device)"
  timeout 570 .carry/gpu_bench backend --runs 2 --seed 11 26 2>&1 | grep -E '^\{|param' | cut -c1-1600
  ;;
esac
