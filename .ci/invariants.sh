#!/usr/bin/env bash
# The code map's invariants (docs/architecture.md) that a script can check; .ci/run runs
# it before the tests. Prints one line per broken rule and exits 1 when any is broken.
#   1. Every crate root says #![forbid(unsafe_code)], except cuzk-gpu, whose unsafe code
#      lives in src/device/ only (the driver, NVRTC and pinned-memory layer).
#   2. Protobuf and gRPC belong to cuzk-server: no other crate lists prost, tonic or
#      tonic-build among its [dependencies] (dev-dependencies may: the e2e tests are
#      clients), and the proving crates' sources never name them.
#   3. Dependencies point one way (docs/architecture.md): cuzk → {server, filecoin, gpu};
#      server → engine; filecoin → engine → groth16; gpu → groth16. The engine names no
#      GPU and no Filecoin crate, the server no GPU or Filecoin crate, groth16 none.
#   4. Synthesis is a value, not a process-wide mode (#31): cuzk-groth16 keeps no mutable
#      state in statics or thread-locals (recorded shapes, budgets, deferral, paths and
#      pool gates belong to a `Synthesizer`). The one exception is the counter that gives
#      each recording a unique id (matrices.rs `NEXT`), an id generator and no state.
#   5. docs/architecture.md is a short code map: a section per crate, none past ten
#      non-blank lines.
#   6. cuzk-gpu's modules have no import circle (#31): tuning and error import no other
#      module of the crate, device (the driver layer) none above it, ops (the kernels'
#      host side) neither backend nor diag, backend not diag.
set -u
cd "$(dirname "$0")/.."
bad=0
fail() { echo "invariant broken: $*"; bad=1; }

for dir in crates/*/; do
  dir=${dir%/}
  name=$(basename "$dir")
  root=$dir/src/lib.rs
  [ -f "$root" ] || root=$dir/src/main.rs
  if [ "$name" = cuzk-gpu ]; then
    outside=$(grep -rlE '\bunsafe\s*(\{|fn|impl|extern|trait)' "$dir/src" | grep -v "^$dir/src/device/" || true)
    [ -z "$outside" ] || fail "cuzk-gpu: unsafe code outside src/device/: $outside"
  elif ! grep -q '^#!\[forbid(unsafe_code)\]' "$root"; then
    fail "$name: $root lacks #![forbid(unsafe_code)]"
  fi
done

# The [dependencies] table of a Cargo.toml, one name per line.
deps() {
  awk '/^\[/ { on = ($0 == "[dependencies]") ; next }
       on && /^[A-Za-z0-9_-]+[ .=]/ { sub(/[ .=].*/, ""); print }' "$1"
}

for dir in crates/*/; do
  name=$(basename "$dir")
  [ "$name" = cuzk-server ] && continue
  for d in $(deps "$dir/Cargo.toml"); do
    case $d in prost | prost-types | tonic | tonic-build | tonic-health | tonic-prost | tonic-prost-build)
      fail "$name depends on $d: protobuf and gRPC belong to cuzk-server" ;;
    esac
  done
done
for name in cuzk-groth16 cuzk-gpu cuzk-filecoin cuzk-engine; do
  hits=$(grep -rlE '\b(prost|tonic)::' "crates/$name/src" || true)
  [ -z "$hits" ] || fail "$name names prost or tonic: $hits"
done

# The workspace crates each crate must not depend on.
above() {
  case $1 in
    cuzk-groth16) echo "cuzk-gpu cuzk-filecoin cuzk-engine cuzk-server cuzk" ;;
    cuzk-gpu) echo "cuzk-filecoin cuzk-engine cuzk-server cuzk" ;;
    cuzk-engine) echo "cuzk-gpu cuzk-filecoin cuzk-server cuzk" ;;
    cuzk-filecoin) echo "cuzk-gpu cuzk-server cuzk" ;;
    cuzk-server) echo "cuzk-gpu cuzk-filecoin cuzk" ;;
    *) echo "" ;;
  esac
}
for dir in crates/*/; do
  name=$(basename "$dir")
  for d in $(deps "$dir/Cargo.toml"); do
    for up in $(above "$name"); do
      [ "$d" = "$up" ] && fail "$name depends on $up, a crate above it"
    done
  done
done

# A static of a type that holds mutable state, `static mut`, or a thread-local.
state='\bthread_local!|\bstatic\s+mut\b|^\s*(pub(\([^)]*\))?\s+)?static\s+[A-Za-z_][A-Za-z0-9_]*\s*:\s*(std::sync::)?(OnceLock|OnceCell|LazyLock|Lazy|Atomic[A-Za-z0-9]*|Mutex|RwLock|Cell|RefCell)\b'
statics=$(grep -rnE "$state" crates/cuzk-groth16/src |
  grep -vE '^crates/cuzk-groth16/src/matrices\.rs:[0-9]+:\s*static NEXT: AtomicU64' || true)
[ -z "$statics" ] || fail "cuzk-groth16 keeps process-wide state (synthesis belongs to a Synthesizer): $statics"

# The code map: one section per crate, none past ten non-blank lines (the long form is
# docs/internals.md).
for dir in crates/*/; do
  name=$(basename "$dir")
  grep -q "^## crates/$name:" docs/architecture.md || fail "docs/architecture.md has no section for $name"
done
long=$(awk '/^## /{ if (n > 10) print name; name = $0; n = 0; next }
            name && NF { n++ } END { if (n > 10) print name }' docs/architecture.md)
[ -z "$long" ] || fail "docs/architecture.md sections past ten lines: $long"

# cuzk-gpu's floors: tuning, error < device < ops < backend < diag.
gpu=crates/cuzk-gpu/src
floor_imports() { # FILES... PATTERN: `crate::` paths of the named modules, comments aside
  local pat=$1
  shift
  grep -nE "crate::($pat)\b" "$@" 2>/dev/null | grep -vE '^[^:]+:[0-9]+:\s*//' || true
}
up=$(floor_imports 'device|ops|backend|diag' "$gpu/tuning.rs" "$gpu/error.rs")
up+=$(floor_imports 'ops|backend|diag' $(find "$gpu/device" -name '*.rs'))
up+=$(floor_imports 'backend|diag' $(find "$gpu/ops" -name '*.rs'))
up+=$(floor_imports 'diag' $(find "$gpu/backend" -name '*.rs'))
[ -z "$up" ] || fail "cuzk-gpu imports up its floors (tuning, error < device < ops < backend < diag): $up"

[ "$bad" = 0 ] && echo "invariants: unsafe code in cuzk-gpu's device layer only, protobuf in cuzk-server only, dependencies one way, no process-wide synthesis state, a short code map, no import circle in cuzk-gpu"
exit "$bad"
