#!/usr/bin/env bash
# Runs the README's demo command as written, in a fresh clone of this repository's HEAD,
# and compares its stdout line by line with the ```text block the README shows under it.
# Figures (d.ddd) and the cache path may differ; every other character must match. Also
# checks that its log lines (stderr, a file here) carry no colour codes.
#
#   bash bench/readme_check.sh
#
# The clone and its cache live in target/readme-check/; the clone builds into a target
# dir of its own, target/readme-build (kept, so a second check is warm). Not this
# checkout's target dir: cargo keys path crates by their place in the workspace, so the
# clone's build would take over this checkout's fingerprints, and a later build here
# would call itself fresh while holding the clone's code. Exit 0 when all match.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$repo/target/readme-check"
rm -rf "$work"
mkdir -p "$work/cache"
git clone --quiet "$repo" "$work/clone"
readme="$work/clone/README.md"

# The first indented `cargo run … --demo` line, and the first ```text block after it.
cmd="$(sed -n 's/^    \(cargo run .*--demo\)$/\1/p' "$readme" | head -n1)"
[ -n "$cmd" ] || { echo "readme_check: no demo command in README.md" >&2; exit 1; }
awk -v cmd="    $cmd" '$0 == cmd { seen = 1 } seen && /^```text$/ { on = 1; next }
  on && /^```$/ { exit } on' "$readme" >"$work/expected"
[ -s "$work/expected" ] || { echo "readme_check: no output block after the command" >&2; exit 1; }

echo "readme_check: running '$cmd' in $work/clone ($(git -C "$work/clone" log --format=%h -1))"
start=$(date +%s)
(cd "$work/clone" && env CARGO_TARGET_DIR="$repo/target/readme-build" \
  XDG_CACHE_HOME="$work/cache" bash -c "$cmd") >"$work/stdout" 2>"$work/stderr" || {
  echo "readme_check: the command failed; stderr:" >&2
  tail -n 20 "$work/stderr" >&2
  exit 1
}
echo "readme_check: finished in $(($(date +%s) - start)) s"

# Figures vary and the table pads them: "name   d.ddd" becomes "name N"; the cache path
# is the README's ~/.cache.
normalize() { sed -E -e "s#$1#~/.cache#g" -e 's/ +[0-9]+\.[0-9]+$/ N/'; }
normalize '\$XDG_CACHE_HOME' <"$work/expected" >"$work/expected.n"
normalize "$work/cache" <"$work/stdout" >"$work/stdout.n"
if ! diff -u "$work/expected.n" "$work/stdout.n"; then
  echo "readme_check: FAILED: the output differs from the README (above: - README, + run)" >&2
  exit 1
fi
if grep -q $'\x1b\[' "$work/stderr"; then
  echo "readme_check: FAILED: colour codes in the log written to a file" >&2
  exit 1
fi
echo "readme_check: ok: $(wc -l <"$work/stdout") lines match the README, no colour in the log"
