#!/usr/bin/env bash
# Host correctness test (no GPU): builds the host twins of the variants with g++ and checks
# them against Python-integer reference Montgomery products.
#   bench/fieldmul/test_host.sh [N_RANDOM] [SEED]     (defaults: 200000, random seed)
set -euo pipefail
cd "$(dirname "$0")"
N=${1:-200000}
SEED=${2:-$RANDOM$RANDOM}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 gen_vectors.py "$N" "$SEED" "$TMP/vec.bin"
g++ -std=c++17 -O2 -mfma -frounding-math -Wall -Wno-unknown-pragmas -o "$TMP/test_host" test_host.cpp
"$TMP/test_host" "$TMP/vec.bin"
# The Fr product (fp_dfma::fr_mul) against a 64-bit-limb reference Montgomery product.
g++ -std=c++17 -O2 -mfma -frounding-math -Wall -Wno-unknown-pragmas -o "$TMP/test_fr_host" test_fr_host.cpp
"$TMP/test_fr_host" "$N" "$SEED"
