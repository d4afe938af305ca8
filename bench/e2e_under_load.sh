#!/usr/bin/env bash
# Runs the end-to-end test binary RUNS times (default 20) with the cores kept busy beside
# it (stress-ng, one CPU hog per core), and counts the runs and tests that failed: the
# check that no test passes or fails by timing (issue #33). Prints one JSON line per run
# and a closing summary line.
#
#   bench/e2e_under_load.sh [RUNS] [FILTER]
#
# Needs stress-ng (Debian: apt-get install stress-ng). Builds the e2e binary first.
set -u -o pipefail
cd "$(dirname "$0")/.."
runs=${1:-20} filter=${2:-}
command -v stress-ng >/dev/null || { echo "stress-ng not found (apt-get install stress-ng)"; exit 2; }
export CARGO_INCREMENTAL=0 TMPDIR="$PWD/target/tmp"
mkdir -p "$TMPDIR"
bin=$(cargo test -p cuzk --test e2e --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "e2e" and m.get("executable"):
        print(m["executable"])')
[ -x "$bin" ] || { echo "no e2e binary"; exit 1; }
cores=$(nproc)
stress-ng --cpu "$cores" --timeout 0 --quiet &
hog=$!
trap 'kill $hog 2>/dev/null' EXIT
failed_runs=0 failed_tests=0
log="$TMPDIR/e2e-under-load.log"
: >"$log"
for i in $(seq "$runs"); do
  start=$(date +%s)
  # From the package's folder, as `cargo test` runs it.
  out=$(cd crates/cuzk && "$bin" $filter --test-threads=2 2>&1)
  rc=$?
  secs=$(( $(date +%s) - start ))
  fails=$(printf '%s\n' "$out" | grep -E '^test .* FAILED$' | sed -E 's/^test (.*) \.\.\. FAILED$/\1/' | tr '\n' ' ')
  n=$(printf '%s\n' "$out" | grep -cE '^test .* FAILED$')
  printf '%s\n' "$out" >>"$log"
  [ "$rc" = 0 ] || failed_runs=$((failed_runs + 1))
  failed_tests=$((failed_tests + n))
  echo "{\"run\":$i,\"rc\":$rc,\"seconds\":$secs,\"failed\":\"${fails% }\",\"cpu_hogs\":$cores}"
done
echo "summary: $runs runs of the e2e binary beside $cores CPU hogs: $failed_runs runs failed, $failed_tests test failures (log: $log)"
