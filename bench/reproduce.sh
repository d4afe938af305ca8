#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md's "Current" table, old binaries against new ones in
# one run on one device. Replaces the dated one-off scripts (h200-s10.sh … h200-s15.sh).
#
#   bench/reproduce.sh build DIR [REV]   # on the dev machine: release `cuzk` and the GPU
#                                        # test binary of REV (default: the work tree) into
#                                        # DIR, stripped (plus `gpu_bench` where REV has it)
#   bench/reproduce.sh OLD NEW PART...   # on the device machine, from the repository root
#
# OLD and NEW are folders made by `build` (e.g. .carry/old and .carry/new; give the same
# folder twice to measure one build). The SupraSeal C2 baseline is used when
# $SUPRASEAL_BIN (default .carry/cuzk-supraseal-bench, built by bench/supraseal/build.sh)
# is executable. Parts, each sized to fit one 600 s device call:
#   gputests  NEW only: GPU name and driver, the GPU test binaries
#   checks    GPU name and driver; per binary: the GPU tests, the NTT checks against the
#             CPU to 2^19, the MSM checks in G1 and G2
#   ntt       NEW only: the NTT checks against the CPU to 2^19, then one transform and the
#             quotient (seven transforms) at 2^24 and 2^27 (medians of 5)
#   backend   per binary, alternating: resident and streamed proves at 2^20, 2^22, 2^24
#             (medians of 3, every proof verified) and two workers on one device,
#             20 partitions of 2^24 (`cuzk bench gpu prove … --overlap 20 --workers 2`)
#   h2h-old, h2h-new
#             `cuzk bench prove --backend gpu --compare supraseal` at 2^20, 2^22, 2^24
#             (PoRep-like shape, medians of 2, every proof verified)
#   filecoin  NEW only: 2 KiB test parameters of the four kinds (made on the GPU), test
#             sectors sealed as interactive, synthetic and non-interactive PoRep, each
#             proved on the GPU and verified by filecoin-proofs; then 32 whole 2 KiB PoRep
#             proofs from 16 clients through the in-process engine with the default config
#             (`cuzk bench batch --kind porep`: s/proof, GPU busy fraction, peak RSS)
#   realsize  NEW only: a fake 32 GiB PoRep request (`cuzk gen request --fake`; its proofs
#             cannot verify) and `cuzk bench synth` on its partition 0: plain synthesis,
#             the recording, and the witness-only path (130,278,541 constraints)
#   e2e24     NEW only: `cuzk bench prove --compare supraseal --deferred` at 2^24 with the
#             circuit as 18 parts: the daemon's synthesis (shape recorded once, witness part
#             by part) plus the prove, end to end first; `gpu` with a, b, c by the host's
#             sparse products, `gpu_deferred` with them by the GPU from the matrices loaded
#             ahead (the daemon's full-card path), each on half the card
#   params32  NEW only: a fake 32 GiB PoRep request and test parameters of its circuit
#             (2^27 domain) made on the GPU into /tmp/p32; kept when this build made them
#             there whole in an earlier call on the same machine
#   batch32   NEW only, after params32 on the same machine: BATCH32_COUNT (2) whole 32 GiB
#             PoRep proofs from the fake request through the in-process engine, from
#             BATCH32_CONCURRENCY (the count) clients (s/proof, GPU busy, peak RSS, matrices
#             in VRAM); fakes cannot verify
#   small     after params32: another process (bench/hold_vram.py) holds all but
#             SMALL_KEEP GiB (default "24 16") of the card, then SMALL_COUNT (4) whole 32 GiB
#             PoRep proofs per size from 2 clients, default config (s/proof, peak RSS), with
#             NEW; or the cases of SMALL_CASES (OLD or NEW, a size, a stream chunk), each
#             traced where the build can (bench/trace.py); SMALL_KIND=snap (after snap32)
#             or window-post (after wpost32) proves that kind's fake request instead
#   host64    NEW only, after params32: all but HOST64_GIB (64) GiB of host memory held by
#             another process (bench/hold_ram.py) and all but HOST64_VRAM (16) GiB of VRAM,
#             then HOST64_COUNT (1) whole 32 GiB PoRep proofs with the budgets of such a host
#             (s/proof, peak RSS, no kill); the disk's direct read speed first
#   sector512 NEW only: a 512 MiB test sector sealed on the dev machine and carried in
#             $SECTOR512 (default .carry/s512: its manifest and payloads, without work/);
#             test parameters of the four kinds at 512 MiB made on the GPU, then each kind
#             proved SECTOR512_COUNT (2) times through the in-process engine (witness-only synthesis, a, b, c
#             on the GPU) and every proof checked by filecoin-proofs (`bench batch --sector`)
#   load2k    NEW only: 2 KiB PoRep test parameters and a sector sealed here, then 32 whole
#             proofs from 16 clients with the default config (GPU busy fraction)
#   wpost32   NEW only: a fake 32 GiB WindowPoSt partition (2,349 sectors), its test
#             parameters into /tmp/pw32 (/tmp/p32 and /tmp/ps32 removed first), and one
#             proof's latency from request to proof (cannot verify)
#   snap32    NEW only: a fake 32 GiB SnapDeals request (16 partitions of 81,049,499
#             constraints, 2^27 domain), its test parameters on the GPU into /tmp/ps32
#             (/tmp/p32 and /tmp/pw32 removed first: the disk holds one 2^27 parameter
#             file; params32 likewise removes the others), then
#             SNAP32_COUNT (3) whole proofs from 2 clients, default config (s/proof, GPU
#             busy, peak RSS); fakes cannot verify
#   winning32 NEW only, after params32 on the same machine: a fake 32 GiB WinningPoSt
#             request (one sector, 66 challenges) and its test parameters (2^19, beside the
#             PoRep ones in /tmp/p32), then per case of WINNING32_CASES (default "lane off")
#             a 32 GiB PoRep load (WINNING32_COUNT (4) proofs from 2 clients) with
#             WINNING32_CRITICAL (10) CRITICAL WinningPoSt requests sent one at a time beside it
#             (WINNING32_GAP_MS (3000) after each completes, so that they spread over the
#             load rather than its first seconds): "lane" with a 1 GiB critical
#             lane ([gpu] critical_lane_bytes), "yield" the same with the main streams
#             yielding to it (CUZK_GPU_CRITICAL_YIELD=1), "off" with none (the baseline;
#             WINNING32_CASES="lane yield off" for all three). Greppable:
#             `"op":"batch_critical"` (critical_p50_s, critical_max_s, devices,
#             beside_compute: the share of each request's span with a PoRep partition's
#             kernels on the card, and mostly_beside_compute, how many had ≥ half) and
#             `"op":"batch"` (the load's s/proof) in $OUT/batch-winning32-CASE.log; each
#             case takes ~3 min (#29)
#   table     the "Current" rows from what the parts above left in $OUT
# Every part ends with `table`. JSON lines land in $OUT (default /tmp/cuzk-out), one file
# per part and binary; the NVRTC cache in .carry/cache (carry it: compiling takes minutes).
set -u -o pipefail

if [ "${1:-}" = build ]; then
  dir=$(realpath -m "${2:?build DIR [REV]}") rev=${3:-}
  mkdir -p "$dir"
  src=$PWD
  if [ -n "$rev" ]; then
    src=$(mktemp -d /tmp/cuzk-rev.XXXX)
    git worktree add --detach "$src" "$rev" >/dev/null
  fi
  # A revision's worktree builds into a target dir of its own: cargo keys path crates by
  # their place in the workspace, so sharing this checkout's would let the worktree's
  # build take over its fingerprints (a later build here would be "fresh" with the
  # worktree's code).
  if [ -n "$rev" ]; then
    export CARGO_TARGET_DIR=$PWD/target/rev-build
  else
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
  fi
  (cd "$src" && cargo build --release --locked -p cuzk) || exit 1
  cp "$CARGO_TARGET_DIR/release/cuzk" "$dir/cuzk"
  for t in gpu budget sparse host_pool; do
    [ -f "$src/crates/cuzk-gpu/tests/$t.rs" ] || continue
    tests=$(cd "$src" && cargo test --release --locked -p cuzk-gpu --test $t --no-run \
      --message-format=json 2>/dev/null | T=$t python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == os.environ["T"] and m.get("executable"):
        print(m["executable"])')
    cp "$tests" "$dir/${t}_tests"
  done
  if [ -f "$src/crates/cuzk-gpu/examples/gpu_bench.rs" ]; then
    (cd "$src" && cargo build --release --locked -p cuzk-gpu --example gpu_bench) &&
      cp "$CARGO_TARGET_DIR/release/examples/gpu_bench" "$dir/gpu_bench"
  fi
  strip "$dir"/* 2>/dev/null
  (cd "$src" && git rev-parse --short HEAD) > "$dir/COMMIT"
  [ -n "$rev" ] && git worktree remove --force "$src"
  ls -la "$dir"
  exit 0
fi

OLD=${1:?OLD NEW PART...} NEW=${2:?OLD NEW PART...}
shift 2
OUT=${OUT:-/tmp/cuzk-out}
mkdir -p "$OUT" .carry/cache
export XDG_CACHE_HOME=$PWD/.carry/cache RUST_LOG=${RUST_LOG:-warn}
SUPRASEAL_BIN=${SUPRASEAL_BIN:-$PWD/.carry/cuzk-supraseal-bench}
PARAMS=${PARAMS:-/tmp/cuzk-params}
SEED=1668643435

t() { echo "== $* [$(date -u +%T)]"; }
commit() { cat "$1/COMMIT" 2>/dev/null || echo "?"; }
label() { if [ "$1" = "$OLD" ] && [ "$OLD" != "$NEW" ]; then echo old; else echo new; fi; }
binaries() { if [ "$OLD" = "$NEW" ]; then echo "$NEW"; else echo "$OLD $NEW"; fi; }

# `gpu_bench backend` in binaries that still have the example, `cuzk bench gpu prove` after.
backend() {
  local dir=$1 to=$2; shift 2
  local sizes=$1; shift
  if [ -x "$dir/gpu_bench" ]; then
    timeout -k 10 "$to" "$dir/gpu_bench" backend --seed 7 "$@" ${sizes//,/ }
  else
    timeout -k 10 "$to" "$dir/cuzk" bench gpu prove --seed 7 --log-n "$sizes" "$@"
  fi
}

# The SupraSeal C2 baseline, or a printed skip.
have_supraseal() {
  [ -x "$SUPRASEAL_BIN" ] && return 0
  echo "no SupraSeal baseline at $SUPRASEAL_BIN (bench/supraseal/build.sh): skipped"
  return 1
}

# The fake 32 GiB PoRep request at /tmp/fake-porep-32g.json, made once per machine; the
# SnapDeals and WindowPoSt ones (snap32, wpost32).
FAKE32=/tmp/fake-porep-32g.json
FAKESNAP32=/tmp/fake-snap-32g.cuzkreq
FAKEWPOST32=/tmp/fake-wpost-32g.cuzkreq
FAKEWINNING32=/tmp/fake-winning-32g.cuzkreq

# Removes the large parameter folders other than $1 (the three 2^27 ones and sector512's,
# whose SnapDeals file is 21.7 GB): the device's 64 GiB disk holds one set.
only_params() {
  local d
  for d in /tmp/p32 /tmp/ps32 /tmp/pw32 /tmp/cuzk-p512; do
    [ "$d" = "$1" ] || rm -rf "$d"
  done
}
fake_request_32g() {
  t "fake 32 GiB PoRep request (its proofs cannot verify)"
  [ -f "$FAKE32" ] || timeout -k 10 120 "$1" gen request --kind porep --sector-size 32GiB --fake \
    --seed 1 --out "$FAKE32" 2>&1 | tail -2 | cut -c1-600
}

# The GPU test binaries of NEW only (the first lines of `checks`, without its NTT and MSM
# sweeps): for a device call that also measures.
part_gputests() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  for tests in gpu budget sparse host_pool; do
    [ -x "$NEW/${tests}_tests" ] || continue
    t "new ($(commit "$NEW")): $tests tests"
    timeout -k 10 150 "$NEW/${tests}_tests" --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror"
  done
}

# The NTT checks of binary folder $1 against the CPU to 2^19 (the direct twists: the outer
# pass's to 2^18, the middle pass's from 2^19), labelled $2.
ntt_checks() {
  t "$2: ntt checks to 2^19 against the CPU (the direct twists: outer pass to 2^18, middle pass from 2^19)"
  timeout -k 10 200 "$1/cuzk" bench ntt --check --check-max-lg 19 --runs 1 --log-n 10 2>&1 |
    grep -E '"ok":false|^\{"checks|rror'
}

part_ntt() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  ntt_checks "$NEW" "new ($(commit "$NEW"))"
  t "new ($(commit "$NEW")): ntt and quotient at 2^24 and 2^27"
  timeout -k 10 200 "$NEW/cuzk" bench ntt --runs 5 --quotient --log-n 24 --log-n 27 2>&1 |
    tee "$OUT/ntt.jsonl" | cut -c1-400
}

part_checks() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  for dir in $(binaries); do
    local w; w=$(label "$dir")
    for tests in gpu budget sparse host_pool; do
      [ -x "$dir/${tests}_tests" ] || continue
      t "$w ($(commit "$dir")): $tests tests"
      timeout -k 10 150 "$dir/${tests}_tests" --test-threads=1 2>&1 | grep -E "^test |test result|panicked|rror"
    done
    ntt_checks "$dir" "$w"
    for g in g1 g2; do
      t "$w: msm checks $g"
      timeout -k 10 90 "$dir/cuzk" bench msm --group $g --check --runs 1 --log-n 10 2>&1 |
        grep -E '"ok":false|^\{"checks|rror'
    done
  done
}

part_backend() {
  for dir in $(binaries); do
    local w; w=$(label "$dir")
    t "$w ($(commit "$dir")): backend 2^20 2^22 2^24, two workers x 20 partitions of 2^24"
    backend "$dir" 280 20,22,24 --runs 3 --overlap 20 --workers 2 2>&1 |
      grep -E '^\{|WARN|rror' | cut -c1-1500 | tee "$OUT/backend-$w.jsonl"
  done
}

part_h2h() {
  local dir=$1 w; w=$(label "$1")
  have_supraseal || return
  for lg in 20 22 24; do
    t "$w ($(commit "$dir")): bench prove 2^$lg against SupraSeal C2"
    timeout -k 10 200 "$dir/cuzk" bench prove --backend gpu --compare supraseal --log-n $lg \
      --reps 2 --seed $SEED --params-dir "$PARAMS" --supraseal-bin "$SUPRASEAL_BIN" 2>&1 |
      grep -E '^\{|rror' | cut -c1-3000 | tee -a "$OUT/h2h-$w.jsonl"
  done
}

part_filecoin() {
  local bin=$NEW/cuzk pd=/tmp/cuzk-fil-params
  mkdir -p "$pd"
  # Not FIL_PROOFS_PARAMETER_CACHE: gen params refuses to write test files there.
  export FIL_PROOFS_PARENT_CACHE=/tmp/cuzk-parents
  for k in porep window-post winning-post snap; do
    t "gen params $k 2KiB"
    timeout -k 10 240 "$bin" gen params --kind $k --sector-size 2KiB --dir "$pd" 2>&1 | tail -2
  done
  for v in interactive synthetic non-interactive; do
    t "gen sector 2KiB, $v PoRep"
    timeout -k 10 120 "$bin" gen sector --sector-size 2KiB --porep $v --out /tmp/cuzk-sector-$v 2>&1 |
      tail -1
  done
  for v in interactive synthetic non-interactive; do
    t "prove porep ($v) on the GPU, verified by filecoin-proofs"
    timeout -k 10 200 "$bin" prove --kind porep --sector /tmp/cuzk-sector-$v --param-dir "$pd" \
      --backend gpu 2>&1 | grep -vE '^\s*$' | tail -4 | cut -c1-400
  done
  for k in window-post winning-post snap; do
    t "prove $k on the GPU, verified by filecoin-proofs"
    timeout -k 10 120 "$bin" prove --kind $k --sector /tmp/cuzk-sector-interactive --param-dir "$pd" \
      --backend gpu 2>&1 | grep -vE '^\s*$' | tail -4 | cut -c1-400
  done
  t "32 whole 2 KiB PoRep proofs from 16 clients, default config"
  timeout -k 10 240 "$bin" bench batch --kind porep --sector /tmp/cuzk-sector-interactive --count 32 \
    --concurrency 16 --param-dir "$pd" --timeline "$OUT/timeline-porep-2k.svg" 2>&1 |
    grep -vE '^\s*$|INFO|WARN' | cut -c1-2000 | tee "$OUT/batch-porep-2k.log"
}

part_realsize() {
  local bin=$NEW/cuzk
  fake_request_32g "$bin"
  t "bench synth: partition 0 of the fake 32 GiB PoRep"
  ( time timeout -k 10 520 "$bin" bench synth --kind porep --request "$FAKE32" --fake \
    --reps 1 ) 2>&1 | grep -vE '^\s*$|INFO' | cut -c1-2000 | tee "$OUT/synth-porep-32g.log"
}

part_e2e24() {
  local bin=$NEW/cuzk
  have_supraseal || return
  t "new ($(commit "$NEW")): bench prove 2^24 as 18 parts, the daemon's synthesis, against SupraSeal C2"
  timeout -k 10 420 "$bin" bench prove --backend gpu --compare supraseal --log-n 24 --parts 18 \
    --reps 3 --deferred --seed $SEED --params-dir "$PARAMS" --supraseal-bin "$SUPRASEAL_BIN" 2>&1 |
    grep -E '^\{|rror| vs supraseal' | cut -c1-6000 | tee "$OUT/e2e24-new.jsonl"
}

part_params32() {
  local bin=$NEW/cuzk
  fake_request_32g "$bin"
  only_params /tmp/p32
  # A later call on the same warm machine, where /tmp is still there, takes the file this
  # build wrote whole instead of another ~55 s and 47.4 GB of writing.
  local made=/tmp/p32/.porep-made-by
  if [ "$(cat "$made" 2>/dev/null)" = "$(commit "$NEW")" ]; then
    t "test parameters of the 32 GiB PoRep circuit: kept from an earlier call of this build"
    : > "$OUT/params-porep-32g.log"
  else
    rm -f "$made"
    t "test parameters of the 32 GiB PoRep circuit (2^27 domain), on the GPU, written to disk"
    ( time timeout -k 10 "${PARAMS32_TIMEOUT:-560}" "$bin" gen params --kind porep --sector-size 32GiB --dir /tmp/p32 ) 2>&1 |
      grep -vE '^\s*$' | cut -c1-2000 | tee "$OUT/params-porep-32g.log"
    [ "${PIPESTATUS[0]}" = 0 ] && commit "$NEW" > "$made"
  fi
  ls -la /tmp/p32 | tee -a "$OUT/params-porep-32g.log"
}

# A batch's output without blank lines and log lines, but with the engine's note of the
# shape it recorded when it preloaded the SRS (the time the first proof no longer waits)
# and the proving mode the device's budget chose.
quiet() {
  awk '!/^[[:space:]]*$/ && (!/INFO|WARN/ || /recorded at preload|not recorded at preload|proving mode/)'
}

# Host memory in use and the cuzk processes' resident set every 5 s into $1, until killed:
# run it in the background (`memwatch F & w=$!`), not in a command substitution, which
# would wait for it. A run that the kernel kills for memory leaves its curve, and the
# curve says whether the peak RSS was the preload's or the proving's.
memwatch() {
  while :; do
    echo "$(date -u +%T) used_mib=$(free -m | awk '/Mem:/{print $3}') cuzk_rss_mib=$(ps -C cuzk -o rss= | awk '{s+=$1} END{print int(s/1024)}')"
    sleep 5
  done > "$1"
}

# The peak line of a memwatch file $1.
peak_mem() {
  sort -t= -k2 -n "$1" | tail -1
}

# Where a run's compute calls waited between partitions (bench/host_steps.py's means line),
# from its timeline SVG $1.
host_steps() {
  python3 bench/host_steps.py "$1" 2>/dev/null | tail -1
}

part_batch32() {
  local bin=$NEW/cuzk n=${BATCH32_COUNT:-2} watch
  local clients=${BATCH32_CONCURRENCY:-$n}
  t "$n whole 32 GiB PoRep proofs from $clients clients (fake request: cannot verify), default config"
  memwatch "$OUT/mem-porep-32g.log" &
  watch=$!
  timeout -k 10 "${BATCH32_TIMEOUT:-580}" "$bin" bench batch --kind porep --request "$FAKE32" --fake \
    --count "$n" --concurrency "$clients" --param-dir /tmp/p32 --timeline "$OUT/timeline-porep-32g.svg" \
    2>&1 | quiet | cut -c1-3000 | tee "$OUT/batch-porep-32g.log"
  kill "$watch" 2>/dev/null
  free -g | tee -a "$OUT/batch-porep-32g.log"
  echo "peak host memory in use: $(peak_mem "$OUT/mem-porep-32g.log")"
  echo "peak cuzk rss sampled: $(sort -t= -k3 -n "$OUT/mem-porep-32g.log" | tail -1) (run started $(head -1 "$OUT/mem-porep-32g.log" | cut -d' ' -f1))"
  host_steps "$OUT/timeline-porep-32g.svg"
}

# Host memory and VRAM lines worth keeping from a run with RUST_LOG=info on the GPU crate:
# the budget, the mode chosen, the SRS host copy released.
quiet_small() {
  awk '!/^[[:space:]]*$/ && (!/INFO|WARN/ || /WARN|vram budget|gpu budget|critical|proving mode|host copy|recorded at preload|registered|into the staging|resident in vram|slow prepare|slow call setup|slow waits for the filler|slow upload on the device/)'
}

# Another process holds all but SMALL_KEEP GiB of the card (default "24 16": an RTX
# 3090/4090, an RTX 4080/5070 Ti; plain cuMemAlloc, as Curio's own GPU tasks on a shared
# card), then SMALL_COUNT (4) whole 32 GiB PoRep proofs from 2 clients with the default
# config, the budget being what was free at start less 1 GiB. SMALL_CASES, when set,
# replaces SMALL_KEEP with cases BUILD@KEEP[@CHUNK[@VAR=VALUE]] run in that order (BUILD:
# OLD or NEW; CHUNK: [gpu] stream_chunk_points, may be empty; VAR=VALUE: one environment
# variable for the run, e.g. a CUZK_GPU_* tuning knob), e.g. "OLD@24 NEW@24@8388608
# NEW@16@@CUZK_GPU_WIDE_SPLIT=0". A build that
# traces (CUZK_GPU_TRACE) leaves trace-CASE.jsonl, summarized by bench/trace.py. After
# params32; with SMALL_KIND=snap after snap32, with SMALL_KIND=window-post after wpost32
# (their fake requests and parameters: #29's kinds on the 16 and 24 GiB cards).
part_small() {
  local n=${SMALL_COUNT:-4} case cases bin build keep chunk var name h watch cfg
  local kind=${SMALL_KIND:-porep} req dir
  case $kind in
    snap) req=$FAKESNAP32 dir=/tmp/ps32 ;;
    window-post) req=$FAKEWPOST32 dir=/tmp/pw32 ;;
    *) kind=porep req=$FAKE32 dir=/tmp/p32 ;;
  esac
  cases=${SMALL_CASES:-$(for k in ${SMALL_KEEP:-24 16}; do printf 'NEW@%s ' "$k"; done)}
  for case in $cases; do
    IFS=@ read -r build keep chunk var <<< "$case"
    case $build in OLD) bin=$OLD/cuzk ;; *) bin=$NEW/cuzk ;; esac
    name=$(echo "$case" | tr '@=' '--')
    cfg=$OUT/small-$name.toml
    : > "$cfg"
    [ -n "$chunk" ] && printf '[gpu]\nstream_chunk_points = %s\n' "$chunk" > "$cfg"
    t "$n whole 32 GiB $kind proofs, all but $keep GiB of VRAM held by another process ($build $(commit "${bin%/cuzk}")${chunk:+, $chunk-point chunks}${var:+, $var})"
    rm -f "$OUT/hold-$keep.json" "$OUT/trace-$name.jsonl"
    python3 bench/hold_vram.py "$keep" > "$OUT/hold-$keep.json" &
    h=$!
    for _ in $(seq 240); do [ -s "$OUT/hold-$keep.json" ] && break; sleep 0.5; done
    cat "$OUT/hold-$keep.json"
    nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader
    memwatch "$OUT/mem-small-$name.log" &
    watch=$!
    CUZK_GPU_TRACE=$OUT/trace-$name.jsonl RUST_LOG=warn,cuzk_gpu=info,cuzk_engine=info,cuzk=info \
      env ${var:+"$var"} timeout -k 10 "${SMALL_TIMEOUT:-280}" \
      "$bin" bench batch --kind "$kind" --request "$req" --fake --count "$n" --concurrency 2 \
      --param-dir "$dir" --config "$cfg" --timeline "$OUT/timeline-small-$name.svg" 2>&1 |
      quiet_small | cut -c1-3000 | tee "$OUT/batch-small-$name.log"
    echo "bench exit: ${PIPESTATUS[0]}"
    kill "$watch" "$h" 2>/dev/null
    wait "$h" 2>/dev/null
    echo "peak host memory in use: $(peak_mem "$OUT/mem-small-$name.log")"
    dmesg 2>/dev/null | grep -i "killed process" | tail -2
    if [ -s "$OUT/trace-$name.jsonl" ]; then
      python3 bench/trace.py "$OUT/trace-$name.jsonl" > "$OUT/trace-$name.summary"
      tail -1 "$OUT/trace-$name.summary"
    fi
    host_steps "$OUT/timeline-small-$name.svg"
  done
}

# A smaller host on this one: another process (bench/hold_ram.py) holds all but
# HOST64_GIB (default 64) GiB of the machine's memory, and another (bench/hold_vram.py)
# all but HOST64_VRAM (default 16) GiB of the card, then HOST64_COUNT (1) whole 32 GiB
# PoRep proofs from 2 clients with the budgets the engine derives on such a host (the
# sizing formula of cuzk.example.toml, written into a config file: the memory it reads
# here is the whole machine's). First the disk's direct read speed (the page cache then
# holds little of the 47.4 GB parameter file). After params32.
part_host64() {
  local bin=$NEW/cuzk n=${HOST64_COUNT:-1} gib=${HOST64_GIB:-64} keep=${HOST64_VRAM:-16} hv hr watch
  local cfg=$OUT/host$gib.toml
  t "disk: direct reads of the parameter file"
  dd if="$(ls /tmp/p32/*.params | head -1)" of=/dev/null bs=64M count=64 iflag=direct 2>&1 | tail -1
  python3 - "$gib" > "$cfg" <<'PY'
import sys
gib = 1 << 30
mem = int(sys.argv[1]) * gib
usable = mem - max(mem // 8, 2 * gib)
srs = min(128 * gib, usable // 2)
rec = min(16 * gib, usable // 8)
print("[engine]")
print(f"srs_budget_bytes = {srs}")
print(f"recorded_r1cs_budget_bytes = {rec}")
print(f"host_memory_budget_bytes = {max(usable - srs - rec, gib)}")
PY
  cat "$cfg"
  t "$n whole 32 GiB PoRep proofs, all but $gib GiB of host memory and $keep GiB of VRAM held"
  python3 bench/hold_vram.py "$keep" > "$OUT/hold-host$gib-vram.json" &
  hv=$!
  for _ in $(seq 240); do [ -s "$OUT/hold-host$gib-vram.json" ] && break; sleep 0.5; done
  python3 bench/hold_ram.py "$gib" > "$OUT/hold-host$gib-ram.json" &
  hr=$!
  for _ in $(seq 600); do [ -s "$OUT/hold-host$gib-ram.json" ] && break; sleep 0.5; done
  cat "$OUT/hold-host$gib-vram.json" "$OUT/hold-host$gib-ram.json"
  free -g
  memwatch "$OUT/mem-host$gib.log" &
  watch=$!
  RUST_LOG=warn,cuzk_gpu=info,cuzk_engine=info,cuzk=info timeout -k 10 "${HOST64_TIMEOUT:-400}" \
    "$bin" bench batch --kind porep --request "$FAKE32" --fake --count "$n" --concurrency 2 \
    --param-dir /tmp/p32 --config "$cfg" --timeline "$OUT/timeline-host$gib.svg" 2>&1 |
    quiet_small | cut -c1-3000 | tee "$OUT/batch-host$gib.log"
  echo "bench exit: ${PIPESTATUS[0]}"
  kill "$watch" "$hr" "$hv" 2>/dev/null
  wait "$hr" "$hv" 2>/dev/null
  echo "peak host memory in use (the held $((gib)) GiB excluded: see the hold's line): $(peak_mem "$OUT/mem-host$gib.log")"
  dmesg 2>/dev/null | grep -i "killed process" | tail -2
}

part_sector512() {
  local bin=$NEW/cuzk pd=/tmp/cuzk-p512 sector=${SECTOR512:-$PWD/.carry/s512}
  mkdir -p "$pd"
  [ -f "$sector/sector.json" ] || { echo "no 512 MiB sector at $sector: skipped"; return; }
  # SnapDeals' 21.7 GB of parameters do not fit the 64 GiB disk beside a 2^27 file.
  only_params "$pd"
  # Kind by kind, SnapDeals (16 partitions of 2^26) last: a call that runs out of time
  # still has the others.
  for k in porep window-post winning-post snap; do
    t "gen params $k 512MiB"
    ( time timeout -k 10 200 "$bin" gen params --kind $k --sector-size 512MiB --dir "$pd" ) 2>&1 |
      grep -E '^\{|^real|rror' | cut -c1-600
    t "$k 512MiB: ${SECTOR512_COUNT:-2} proof(s) through the engine, each checked by filecoin-proofs"
    timeout -k 10 240 "$bin" bench batch --kind $k --sector "$sector" --count "${SECTOR512_COUNT:-2}" \
      --concurrency "${SECTOR512_COUNT:-2}" --param-dir "$pd" 2>&1 |
      grep -vE '^\s*$|INFO|WARN' | cut -c1-2000 | tee "$OUT/batch-$k-512m.log"
  done
}

part_load2k() {
  local bin=$NEW/cuzk pd=/tmp/cuzk-fil-params
  mkdir -p "$pd"
  export FIL_PROOFS_PARENT_CACHE=/tmp/cuzk-parents
  t "gen params porep 2KiB, gen sector 2KiB"
  timeout -k 10 240 "$bin" gen params --kind porep --sector-size 2KiB --dir "$pd" 2>&1 | tail -1 | cut -c1-300
  timeout -k 10 120 "$bin" gen sector --sector-size 2KiB --out /tmp/cuzk-sector-interactive 2>&1 | tail -1
  t "32 whole 2 KiB PoRep proofs from 16 clients, default config"
  timeout -k 10 240 "$bin" bench batch --kind porep --sector /tmp/cuzk-sector-interactive \
    --count "${LOAD2K_COUNT:-32}" --concurrency "${LOAD2K_CONCURRENCY:-16}" --param-dir "$pd" \
    --timeline "$OUT/timeline-porep-2k.svg" 2>&1 |
    quiet | cut -c1-2000 | tee "$OUT/batch-porep-2k.log"
}

part_wpost32() {
  local bin=$NEW/cuzk req=$FAKEWPOST32
  t "fake 32 GiB WindowPoSt partition (2,349 sectors; cannot verify), its test parameters"
  only_params /tmp/pw32
  [ -f "$req" ] || timeout -k 10 120 "$bin" gen request --kind window-post --sector-size 32GiB --fake \
    --out "$req" 2>&1 | grep -E '^\{' | cut -c1-400
  ( time timeout -k 10 "${WPOST32_PARAMS_TIMEOUT:-300}" "$bin" gen params --kind window-post \
    --sector-size 32GiB --dir /tmp/pw32 ) 2>&1 | grep -vE '^\s*$' | cut -c1-1500 |
    tee "$OUT/params-wpost-32g.log"
  t "one 32 GiB WindowPoSt proof, latency from request to proof"
  timeout -k 10 "${WPOST32_TIMEOUT:-240}" "$bin" bench batch --kind window-post --request "$req" --fake \
    --count 2 --concurrency 1 --param-dir /tmp/pw32 2>&1 | quiet |
    cut -c1-3000 | tee "$OUT/batch-wpost-32g.log"
}

part_snap32() {
  local bin=$NEW/cuzk req=$FAKESNAP32 n=${SNAP32_COUNT:-3} watch
  t "fake 32 GiB SnapDeals request (16 partitions; cannot verify), its test parameters"
  only_params /tmp/ps32
  [ -f "$req" ] || timeout -k 10 120 "$bin" gen request --kind snap --sector-size 32GiB --fake \
    --out "$req" 2>&1 | grep -E '^\{' | cut -c1-400
  ( time timeout -k 10 "${SNAP32_PARAMS_TIMEOUT:-400}" "$bin" gen params --kind snap \
    --sector-size 32GiB --dir /tmp/ps32 ) 2>&1 | grep -vE '^\s*$' | cut -c1-1500 |
    tee "$OUT/params-snap-32g.log"
  t "$n whole 32 GiB SnapDeals proofs from 2 clients, default config"
  memwatch "$OUT/mem-snap-32g.log" &
  watch=$!
  timeout -k 10 "${SNAP32_TIMEOUT:-400}" "$bin" bench batch --kind snap --request "$req" --fake \
    --count "$n" --concurrency 2 --param-dir /tmp/ps32 --timeline "$OUT/timeline-snap-32g.svg" \
    2>&1 | quiet | cut -c1-3000 | tee "$OUT/batch-snap-32g.log"
  kill "$watch" 2>/dev/null
  echo "peak host memory in use: $(peak_mem "$OUT/mem-snap-32g.log")"
}

# The host kernel's counters that can stall any thread of the process at a page fault or
# with an interrupt: direct reclaim and compaction stalls (/proc/vmstat), TLB shootdowns
# (/proc/interrupts, all CPUs). `kstats` prints one line of them; `kstats_delta A B`
# prints B - A per counter (the lane's host steps stalled 0.3-1.1 s at random places
# under a PoRep load, docs/runs/2026-12-06.md).
kstats() {
  awk '/^(allocstall_normal|allocstall_movable|pgscan_direct|compact_stall|thp_fault_alloc) /{printf "%s=%s ", $1, $2}' /proc/vmstat
  awk '$1 == "TLB:" {s = 0; for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i; printf "tlb_shootdowns=%d", s}' /proc/interrupts
  echo
}
kstats_delta() {
  python3 -c '
import sys
a = dict(kv.split("=") for kv in sys.argv[1].split())
b = dict(kv.split("=") for kv in sys.argv[2].split())
print("kernel counters over the run: " + ", ".join(f"{k} {int(b[k]) - int(a.get(k, 0)):,}" for k in b))
' "$1" "$2"
}

# The 32 GiB WinningPoSt latency under a 32 GiB PoRep load (#29: <= 1 s), with the GPU's
# critical lane and without it. After params32 (the PoRep parameters in /tmp/p32); the
# WinningPoSt parameters are small (2^19) and go beside them.
part_winning32() {
  local bin=$NEW/cuzk req=$FAKEWINNING32 n=${WINNING32_COUNT:-4} case cfg watch
  fake_request_32g "$bin"
  t "fake 32 GiB WinningPoSt request (one sector, 66 challenges; cannot verify), its test parameters"
  [ -f "$req" ] || timeout -k 10 120 "$bin" gen request --kind winning-post --sector-size 32GiB --fake \
    --out "$req" 2>&1 | grep -E '^\{' | cut -c1-400
  ( time timeout -k 10 "${WINNING32_PARAMS_TIMEOUT:-200}" "$bin" gen params --kind winning-post \
    --sector-size 32GiB --dir /tmp/p32 ) 2>&1 | grep -vE '^\s*$' | cut -c1-1500 |
    tee "$OUT/params-winning-32g.log"
  for case in ${WINNING32_CASES:-lane off}; do
    cfg=$OUT/winning32-$case.toml
    local yield=0
    case $case in
      lane) printf '[gpu]\ncritical_lane_bytes = 1073741824\n' > "$cfg" ;;
      yield) printf '[gpu]\ncritical_lane_bytes = 1073741824\n' > "$cfg"; yield=1 ;;
      *) printf '[gpu]\ncritical_lane_bytes = 0\n' > "$cfg" ;;
    esac
    t "$n whole 32 GiB PoRep proofs from 2 clients, ${WINNING32_CRITICAL:-10} CRITICAL 32 GiB WinningPoSt beside them, critical lane: $case"
    memwatch "$OUT/mem-winning32-$case.log" &
    watch=$!
    local k0; k0=$(kstats)
    CUZK_GPU_CRITICAL_YIELD=$yield RUST_LOG=warn,cuzk_gpu=info,cuzk_engine=info,cuzk=info \
      timeout -k 10 "${WINNING32_TIMEOUT:-280}" \
      "$bin" bench batch --kind porep --request "$FAKE32" --fake --count "$n" --concurrency 2 \
      --param-dir /tmp/p32 --config "$cfg" --critical-request "$req" \
      --critical-count "${WINNING32_CRITICAL:-10}" --critical-gap-ms "${WINNING32_GAP_MS:-3000}" \
      --timeline "$OUT/timeline-winning32-$case.svg" 2>&1 |
      quiet_small | cut -c1-6000 | tee "$OUT/batch-winning32-$case.log"
    echo "bench exit: ${PIPESTATUS[0]}"
    kstats_delta "$k0" "$(kstats)"
    kill "$watch" 2>/dev/null
    echo "peak host memory in use: $(peak_mem "$OUT/mem-winning32-$case.log")"
    host_steps "$OUT/timeline-winning32-$case.svg"
  done
}

# One row per headline case: figure (old → new), date, GPU, commit, the command.
part_table() {
  local gpu; gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  OUT=$OUT GPU="${gpu:-?}" DATE=$(date -u +%F) OLDC=$(commit "$OLD") NEWC=$(commit "$NEW") python3 - <<'EOF'
import json, os
out = os.environ["OUT"]

def lines(name):
    try:
        with open(os.path.join(out, name)) as f:
            return [json.loads(l) for l in f if l.startswith("{")]
    except (OSError, ValueError):
        return []

def fig(v, unit):
    return "–" if v is None else f"{v:,.1f} {unit}" if unit == "ms" else f"{v:.4f} {unit}"

rows = []
cmd_b = "bench/reproduce.sh OLD NEW backend"
for lg in (20, 22, 24):
    got = {}
    for w in ("old", "new"):
        for l in lines(f"backend-{w}.jsonl"):
            if l.get("op") == "gpu_prove" and l.get("log_n") == lg and l.get("residency") == "resident":
                got[w] = l.get("ms_median")
    rows.append((f"GPU prove 2^{lg}, resident, lone", got, "ms", cmd_b))
got = {}
for w in ("old", "new"):
    for l in lines(f"backend-{w}.jsonl"):
        if l.get("op") == "gpu_overlap":
            got[w] = l.get("s_per_partition")
rows.append(("two workers, 20 partitions of 2^24", got, "s/partition", cmd_b))
for lg in (20, 22, 24):
    got, ss = {}, {}
    for w in ("old", "new"):
        for l in lines(f"h2h-{w}.jsonl"):
            if l.get("op") == "prove_head_to_head" and l.get("log_n") == lg:
                got[w] = l.get("gpu_prove_ms_median")
                ss[w] = l.get("supraseal_prove_ms_median")
    extra = ""
    if ss.get("new") and got.get("new"):
        extra = f" (SupraSeal C2 {ss['new']:,.1f} ms, {ss['new'] / got['new']:.2f}×)"
    rows.append((f"prove 2^{lg} vs SupraSeal C2{extra}", got, "ms",
                 f"bench/reproduce.sh OLD NEW h2h-new"))
print("| case | old | new | date | GPU | commits (old → new) | command |")
print("|---|---|---|---|---|---|---|")
for name, got, unit, cmd in rows:
    if not got:
        continue
    print(f"| {name} | {fig(got.get('old'), unit)} | {fig(got.get('new'), unit)} | "
          f"{os.environ['DATE']} | {os.environ['GPU']} | {os.environ['OLDC']} → "
          f"{os.environ['NEWC']} | `{cmd}` |")
EOF
}

for part in "$@"; do
  case $part in
    checks) part_checks ;;
    gputests) part_gputests ;;
    ntt) part_ntt ;;
    backend) part_backend ;;
    h2h-old) part_h2h "$OLD" ;;
    h2h-new) part_h2h "$NEW" ;;
    filecoin) part_filecoin ;;
    realsize) part_realsize ;;
    e2e24) part_e2e24 ;;
    params32) part_params32 ;;
    batch32) part_batch32 ;;
    small) part_small ;;
    host64) part_host64 ;;
    sector512) part_sector512 ;;
    load2k) part_load2k ;;
    wpost32) part_wpost32 ;;
    snap32) part_snap32 ;;
    winning32) part_winning32 ;;
    table) ;;
    *) echo "unknown part $part (checks, gputests, ntt, backend, h2h-old, h2h-new, filecoin, realsize, e2e24, params32, batch32, small, host64, sector512, load2k, wpost32, snap32, winning32, table)"; exit 2 ;;
  esac
done
t table
part_table
