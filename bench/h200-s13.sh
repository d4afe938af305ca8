#!/usr/bin/env bash
# Session of 2026-11-30 19:30 UTC on an H200 (docs/benchmarks.md):
#   part n: the fused quotient (coset shifts and 1/n in the passes, H written out of place in
#           natural order) and the NTT passes of up to 256 threads: GPU tests, NTT checks
#           against the CPU to 2^16 (with the quotient), MSM checks in G1 and G2; NTTs and the
#           quotient at 2^20/2^22/2^24; the backend at 2^20/2^22/2^24 and two workers over
#           20 partitions of 2^24.
#   part h: the head-to-head of #4 in one run: cuzk GPU vs SupraSeal C2 vs the cuzk CPU
#           backend at 2^20, 2^22 and 2^24 (PoRep-like default shape), all proofs verified.
#   part d: the head-to-head at 2^24 on the dense shape (--bit-fraction 0), SupraSeal only.
#   part x: the backend at 2^26 (parameters made on the device into host memory).
#   part o: a lone prove takes the token once a, b, c are uploaded and fills the witness
#           vectors under the quotient and the H sum: GPU tests, the backend at 2^24 with the
#           two-worker overlap, the head-to-head at 2^24 against SupraSeal C2.
#   part f: the final binaries (the witness fill as one closure): GPU tests, the backend at
#           2^22 with the two-worker overlap.
#   part r: after the review (shared Fp/Fr column loops, one end of the timed section, the
#           pass kind): GPU tests, NTT and MSM checks, the backend at 2^22 with the overlap.
# Usage: bash bench/h200-s13.sh n|h|d|x|o|f|r   (each fits one 600 s device call)
source "$(dirname "$0")/device-common.sh"
gpu_info
case $1 in
n)
  gpu_checks
  t "ntt and quotient 20 22 24, coset 24"
  timeout 90 .carry/gpu_bench ntt --quotient --runs 5 --seed 5 20 22 24 2>&1 | grep '^{' | cut -c1-300
  timeout 60 .carry/gpu_bench ntt --coset --runs 5 --seed 5 24 2>&1 | grep '^{' | cut -c1-300
  t "backend 20 22 24, overlap 20 partitions x 2 workers at 24"
  timeout 200 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 20 22 24 2>&1 | grep '^{' | cut -c1-1400
  ;;
h)
  h2h 90 20 --compare supraseal,cpu
  h2h 150 22 --compare supraseal,cpu
  h2h 330 24 --compare supraseal,cpu
  ;;
d)
  h2h 290 24 --compare supraseal --bit-fraction 0
  ;;
o)
  t gpu tests; timeout 150 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t "backend 24, overlap 20 partitions x 2 workers"
  timeout 150 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 24 2>&1 | grep '^{' | cut -c1-1400
  h2h 250 24 --compare supraseal
  ;;
f)
  t gpu tests; timeout 150 .carry/gpu_tests --test-threads=1 2>&1 | grep -E "^test |test result"
  t "backend 22, overlap 20 partitions x 2 workers"
  timeout 120 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 22 2>&1 | grep '^{' | cut -c1-1400
  ;;
r)
  gpu_checks
  t "backend 22, overlap 20 partitions x 2 workers"
  timeout 120 .carry/gpu_bench backend --runs 3 --seed 7 --overlap 20 --workers 2 22 2>&1 | grep '^{' | cut -c1-1400
  ;;
x)
  t "backend 26 (parameters made on the device)"
  timeout 560 .carry/gpu_bench backend --runs 2 --seed 11 26 2>&1 | grep -E '^\{|param' | cut -c1-1600
  ;;
esac
