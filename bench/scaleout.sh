#!/usr/bin/env bash
# The scale-out figures of docs/benchmarks.md (#30): proofs/s of small synthetic proofs
# straight to one daemon, through nginx to that one daemon, and through nginx to three;
# and the round trip of one call (GetStatus, p50/p99 of N calls from one Python grpcio
# client on one channel) straight to a daemon and through nginx. Prints one JSON line per
# case.
#
#   bash bench/scaleout.sh [COUNT] [CONCURRENCY] [LOG_N] [CALLS]
#
# COUNT proofs (default 60) from CONCURRENCY clients (default 6) of one 2^LOG_N partition
# each (default 10); CALLS round trips per latency case (default 2000). Uses
# target/debug/cuzk (CUZK=PATH for another build), nginx from PATH or /usr/sbin, and
# Python's grpc module. Daemons on 127.0.0.1:19821-19823, nginx on 127.0.0.1:19830; all
# files under target/bench-scaleout/.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
count="${1:-60}" conc="${2:-6}" log_n="${3:-10}" calls="${4:-2000}"
cuzk="${CUZK:-$repo/target/debug/cuzk}"
nginx="$(command -v nginx || echo /usr/sbin/nginx)"
[ -x "$cuzk" ] || { echo "scaleout: no $cuzk (cargo build -p cuzk, or CUZK=...)" >&2; exit 1; }
[ -x "$nginx" ] || { echo "scaleout: no nginx (apt-get install nginx-light)" >&2; exit 1; }
python3 -c 'import grpc' || { echo "scaleout: no Python grpc module (pip install grpcio)" >&2; exit 1; }

work="$repo/target/bench-scaleout"
rm -rf "$work"
mkdir -p "$work/params" "$work/nginx"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

for i in 1 2 3; do
  "$cuzk" daemon --name "d$i" --listen "127.0.0.1:1982$i" --http "" --journal-dir "" \
    --allow-synthetic --param-dir "$work/params" 2>"$work/d$i.log" &
  pids+=($!)
done

"$repo/deploy/nginx/gen.sh" --listen 127.0.0.1:19830 \
  d1=127.0.0.1:19821 d2=127.0.0.1:19822 d3=127.0.0.1:19823 >"$work/nginx/cuzk.conf"
# nginx in front of d1 alone, for the proxy's own cost.
"$repo/deploy/nginx/gen.sh" --listen 127.0.0.1:19831 d1=127.0.0.1:19821 |
  sed 's/cuzk_/cuzk1_/g' >"$work/nginx/one.conf"
user=
[ "$(id -u)" != 0 ] || user="user root;"
cat >"$work/nginx/nginx.conf" <<EOF
$user
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi; uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  include $work/nginx/cuzk.conf;
  include $work/nginx/one.conf;
}
EOF
"$nginx" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e stderr -g 'daemon off;' 2>"$work/nginx.log" &
pids+=($!)

# The round trip of one call, as a Python helper (no generated stubs: GetStatusRequest is
# empty on the wire).
cat >"$work/rtt.py" <<'EOF'
import json, sys, time
import grpc
target, calls, header, case = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
channel = grpc.insecure_channel(target)
call = channel.unary_unary("/cuzk.v1.ProvingEngine/GetStatus",
                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
meta = [("x-cuzk-daemon", header)] if header else None
deadline = time.time() + 60
while True:
    try:
        call(b"", metadata=meta, timeout=5)
        break
    except grpc.RpcError:
        if time.time() > deadline:
            raise
        time.sleep(0.2)
for _ in range(200):
    call(b"", metadata=meta)
xs = []
for _ in range(calls):
    t = time.perf_counter()
    call(b"", metadata=meta)
    xs.append(time.perf_counter() - t)
xs.sort()
print(json.dumps({"op": "scaleout_rtt", "case": case, "calls": calls,
                  "p50_us": round(xs[len(xs) // 2] * 1e6, 1),
                  "p99_us": round(xs[int(len(xs) * 0.99)] * 1e6, 1),
                  "mean_us": round(sum(xs) / len(xs) * 1e6, 1)}))
EOF

python3 "$work/rtt.py" 127.0.0.1:19821 "$calls" "" "direct" >/dev/null # waits for d1
python3 "$work/rtt.py" 127.0.0.1:19830 10 d2 "warm" >/dev/null
python3 "$work/rtt.py" 127.0.0.1:19830 10 d3 "warm" >/dev/null

batch() { # CASE ADDR: one bench batch run, its JSON line with the case name added
  "$cuzk" bench batch --connect "$2" --kind synthetic --log-n "$log_n" --partitions 1 \
    --count "$count" --concurrency "$conc" 2>>"$work/batch.log" |
    python3 -c 'import json, sys
line = json.loads(sys.stdin.readline())
print(json.dumps({"op": "scaleout_batch", "case": sys.argv[1], "count": line["count"],
                  "concurrency": line["concurrency"], "log_n": line.get("log_n"),
                  "failed": line["failed"], "wall_s": round(line["wall_s"], 3),
                  "proofs_per_s": round(line["count"] / line["wall_s"], 2),
                  "latency_p50_s": round(line["latency_p50_s"], 3)}))' "$1"
}
# Parameters made and shapes recorded on every daemon before anything is timed.
for a in 127.0.0.1:19821 127.0.0.1:19822 127.0.0.1:19823; do
  "$cuzk" bench batch --connect "$a" --kind synthetic --log-n "$log_n" --partitions 1 \
    --count 2 --concurrency 1 >/dev/null 2>>"$work/batch.log"
done

batch "direct to d1" 127.0.0.1:19821
batch "nginx to d1 alone" 127.0.0.1:19831
batch "nginx to d1-d3" 127.0.0.1:19830
python3 "$work/rtt.py" 127.0.0.1:19821 "$calls" "" "GetStatus direct to d1"
python3 "$work/rtt.py" 127.0.0.1:19830 "$calls" d1 "GetStatus via nginx to d1 (x-cuzk-daemon)"
python3 "$work/rtt.py" 127.0.0.1:19830 "$calls" "" "GetStatus via nginx, least_conn"
echo "{\"op\": \"scaleout_env\", \"commit\": \"$(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo +dirty)\", \"cores\": $(nproc), \"loadavg_1m\": $(cut -d" " -f1 /proc/loadavg), \"nginx\": \"$("$nginx" -v 2>&1 | sed 's/.*\///')\", \"cuzk\": \"$cuzk\"}"
