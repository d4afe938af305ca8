#!/usr/bin/env python3
"""Hold GPU memory from a second process, so that only KEEP_GIB stay free: the honest
stand-in for a smaller card (16 or 24 GiB) or a card shared with other GPU work (Curio's
PC2 and tree building allocate the same way). Plain driver-API cuMemAlloc through ctypes:
no CUDA toolkit or Python package needed, only the driver's libcuda.so.1.

    bench/hold_vram.py KEEP_GIB [--device N] [--seconds S]

Allocates in 1 GiB pieces (then smaller ones) until the device's free memory is at most
KEEP_GIB, prints one JSON line ({"held_bytes", "free_bytes", "total_bytes"}) once it holds
them, then sleeps until killed (or S seconds). Used by bench/reproduce.sh's `small` part.
"""

import argparse
import ctypes
import json
import signal
import sys
import time

GIB = 1 << 30


def check(rc, what):
    if rc != 0:
        sys.exit(f"hold_vram: {what} failed with CUDA error {rc}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("keep_gib", type=float, help="GiB to leave free on the device")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seconds", type=float, default=3600.0)
    args = p.parse_args()

    cuda = ctypes.CDLL("libcuda.so.1")
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), args.device), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def mem_info():
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        check(cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value, total.value

    keep = int(args.keep_gib * GIB)
    held = []
    piece = GIB
    while True:
        free, total = mem_info()
        over = free - keep
        if over <= 0:
            break
        size = min(piece, over)
        ptr = ctypes.c_uint64()
        rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
        if rc != 0:
            if piece <= (1 << 20):
                break
            piece //= 2
            continue
        held.append((ptr, size))
    free, total = mem_info()
    print(
        json.dumps(
            {
                "held_bytes": sum(s for _, s in held),
                "free_bytes": free,
                "total_bytes": total,
                "keep_bytes": keep,
            }
        ),
        flush=True,
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(args.seconds)


if __name__ == "__main__":
    main()
