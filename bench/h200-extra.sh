#!/usr/bin/env bash
# Device run: `cuzk prove --demo --backend gpu`, the daemon on the GPU over its unix
# socket (bench batch --connect, status showing the SRS tier), then the GPU backend alone
# at 2^26 (parameters generated in host memory on the GPU and never written to disk;
# SupraSeal and the CPU backend are not run at this size: device time).
set -u -o pipefail
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=warn
OUT=${OUT:-/tmp/cuzk-out}; mkdir -p "$OUT"
echo "== prove --demo --backend gpu"
timeout 60 .carry/cuzk prove --demo --backend gpu 2>&1 | tail -16
echo "== daemon on the GPU"
rm -f /tmp/cuzk.sock
.carry/cuzk daemon --listen unix:///tmp/cuzk.sock --http 127.0.0.1:9870 --param-dir /tmp/cuzk-dparams > "$OUT/daemon.log" 2>&1 &
DPID=$!
for i in $(seq 1 50); do [ -S /tmp/cuzk.sock ] && break; sleep 0.2; done
timeout 120 .carry/cuzk bench batch --connect unix:///tmp/cuzk.sock --log-n 18 --partitions 2 --count 8 --concurrency 4 2>&1 | tail -4
timeout 20 .carry/cuzk status --connect unix:///tmp/cuzk.sock 2>&1 | head -30
timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/9870; printf "GET /metrics HTTP/1.0\r\n\r\n" >&3; cat <&3' | grep -E "^cuzk_(jobs|srs|device|gpu)" | head -12
kill -TERM $DPID; wait $DPID; echo "daemon exit rc=$?"; tail -3 "$OUT/daemon.log"
echo "== gpu backend 2^26"
timeout ${LIMIT26:-420} .carry/gpu_bench backend --runs 2 --seed 11 26 2>&1 | grep -v '^\s*$' | tail -8
