#!/usr/bin/env bash
# Builds bench/fieldmul/fieldmul (sm_90, static cudart). Runs nothing on a GPU.
# Also writes fieldmul.cubin and a resource/SASS report (build/report.txt) unless NO_REPORT=1.
set -euo pipefail
cd "$(dirname "$0")"
NV=${NV:-/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13}
CUOBJ=${CUOBJ:-/tmp/wh/cuobj/nvidia/cu13/bin}
if [ -d "$NV/bin" ]; then export PATH="$NV/bin:$PATH"; fi
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
FLAGS="-O3 -std=c++17 -arch=$ARCH -lineinfo"
INC=""; LIB=""
if [ -d "$NV/include" ]; then INC="-I$NV/include"; LIB="-L$NV/lib"; fi
$NVCC $FLAGS $INC -o fieldmul fieldmul.cu $LIB -cudart static -Xcompiler -static-libstdc++,-static-libgcc -ldl -lpthread -lrt
ls -l fieldmul
if [ "${NO_REPORT:-0}" != 1 ]; then
    mkdir -p build
    $NVCC $FLAGS $INC -cubin --resource-usage -o build/fieldmul.cubin fieldmul.cu 2> build/resource.txt || true
    if [ -x "$CUOBJ/cuobjdump" ]; then
        "$CUOBJ/cuobjdump" -sass build/fieldmul.cubin > build/fieldmul.sass
        python3 sass_report.py build/resource.txt build/fieldmul.sass | tee build/report.txt
    fi
fi
