#!/usr/bin/env bash
# What the job journal (issue #32) costs: the same load of small real proofs through a
# daemon with the journal and without it, alternating, ROUNDS times each (default 3).
# Each round starts a fresh daemon (CPU backend, synthetic kind), then `cuzk bench batch
# --connect` submits COUNT (default 200) synthetic proofs of 2^LOG_N constraints (default
# 10: ~10 ms each, a harsher load than 2 KiB PoRep, whose proofs take longer while the
# journal writes the same two fsynced records per job) from 16 clients. Prints one JSON
# line per round and a summary: proofs/s with and without, and the cost in percent.
#
#   bench/journal_cost.sh [CUZK_BINARY]     (default target/release/cuzk)
set -u -o pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/cuzk}")
rounds=${ROUNDS:-3} count=${COUNT:-200} log_n=${LOG_N:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/cuzk-journal-cost.XXXX")
trap 'kill $daemon 2>/dev/null; rm -rf "$work"' EXIT
daemon=
one() { # $1: with|without
  local sock="$work/d.sock" jdir=""
  [ "$1" = with ] && { jdir="$work/journal-$RANDOM"; mkdir -p "$jdir"; }
  "$bin" daemon --listen "unix://$sock" --http "" --allow-synthetic --param-dir "$work/params" \
    --journal-dir "$jdir" --name bench 2>"$work/daemon.log" &
  daemon=$!
  for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.05; done
  line=$("$bin" bench batch --connect "unix://$sock" --kind synthetic --log-n "$log_n" \
    --partitions 1 --count "$count" --concurrency 16 2>/dev/null | tail -1)
  kill -TERM $daemon; wait $daemon 2>/dev/null
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"journal": sys.argv[2], "count": d["count"], "failed": d["failed"], "wall_s": round(d["wall_s"],3), "proofs_per_s": round(d["count"]/d["wall_s"],1)}))' "$line" "$1"
}
# Parameters generated once, outside the timed rounds.
one without >/dev/null
for r in $(seq "$rounds"); do one without; one with; done | tee "$work/rounds.jsonl"
python3 - "$work/rounds.jsonl" "$count" "$log_n" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
rate = {k: statistics.median(r["proofs_per_s"] for r in rows if r["journal"] == k) for k in ("with", "without")}
cost = 100 * (1 - rate["with"] / rate["without"])
print(json.dumps({"op": "journal_cost", "count": int(sys.argv[2]), "log_n": int(sys.argv[3]),
                  "median_proofs_per_s_without": rate["without"], "median_proofs_per_s_with": rate["with"],
                  "cost_percent": round(cost, 2), "failed": sum(r["failed"] for r in rows), "limit_percent": 5}))
PY
