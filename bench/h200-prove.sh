#!/usr/bin/env bash
# One device run for issue #4 (see docs/benchmarks.md): `cuzk bench prove` head to head,
# cuzk's GPU backend vs SupraSeal C2 (bench/supraseal, same parameters file, same circuit,
# witness, r and s) vs cuzk's CPU backend at 2^20, 2^22, 2^24; parameters made on the GPU.
set -u -o pipefail
BIN=${CUZK:-.carry/cuzk}
OUT=${OUT:-/tmp/cuzk-out}
PD=${PD:-/tmp/cuzk-params}
mkdir -p "$OUT" "$PD"
export XDG_CACHE_HOME=${XDG_CACHE_HOME:-$PWD/.carry/cache}
export RUST_LOG=${RUST_LOG:-warn}
SEED=1668643435
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/smi.txt"
for lg in ${SIZES:-20 22 24}; do
  echo "== bench prove 2^$lg"
  t0=$(date +%s)
  timeout ${LIMIT:-300} "$BIN" bench prove --backend gpu --compare supraseal,cpu --log-n $lg \
    --reps ${REPS:-2} --seed $SEED --params-dir "$PD" --supraseal-bin .carry/cuzk-supraseal-bench \
    2> "$OUT/prove-$lg.err" | tee -a "$OUT/prove.jsonl"
  rc=$?
  echo "== 2^$lg rc=$rc in $(( $(date +%s) - t0 )) s"; tail -5 "$OUT/prove-$lg.err"
  if [ $rc -ne 0 ]; then
    echo "== retry 2^$lg without SupraSeal"
    timeout 200 "$BIN" bench prove --backend gpu --compare cpu --log-n $lg --reps ${REPS:-2} \
      --seed $SEED --params-dir "$PD" 2>> "$OUT/prove-$lg.err" | tee -a "$OUT/prove.jsonl"
  fi
done
