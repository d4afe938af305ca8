#!/usr/bin/env python3
"""Hold host memory from a second process, so that only KEEP_GIB of the machine's memory
stay for everything else: the honest stand-in for a smaller host (64 GiB) on a larger
one, as bench/hold_vram.py is for a smaller card. Anonymous memory, every page faulted in
and locked (mlock), so the kernel can neither reclaim nor swap it: the page cache and
the daemon share what is left, and a daemon that needs more is OOM-killed as it would
be on the smaller host.

    bench/hold_ram.py KEEP_GIB [--seconds S]

Holds MemTotal − KEEP_GIB, prints one JSON line ({"held_bytes", "mem_total_bytes",
"available_bytes"}) once it holds them, then sleeps until killed (or S seconds). Used by
bench/reproduce.sh's `host64` part.
"""

import argparse
import ctypes
import json
import mmap
import signal
import sys
import time

GIB = 1 << 30


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    sys.exit(f"hold_ram: no {key} in /proc/meminfo")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("keep_gib", type=float, help="GiB of the machine's memory to leave")
    p.add_argument("--seconds", type=float, default=3600.0)
    args = p.parse_args()

    total = meminfo("MemTotal")
    hold = total - int(args.keep_gib * GIB)
    if hold <= 0:
        sys.exit(f"hold_ram: the machine has {total} bytes, less than {args.keep_gib} GiB")
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pieces = []
    left = hold
    while left > 0:
        n = min(left, GIB)
        # MAP_POPULATE: the kernel faults the pages in (much faster than touching them).
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        if libc.mlock(ctypes.c_void_p(addr), ctypes.c_size_t(n)) != 0:
            # Written pages stay held without swap; say that they are not locked.
            print(f"hold_ram: mlock failed (errno {ctypes.get_errno()}): held, not locked",
                  file=sys.stderr)
        pieces.append(m)
        left -= n
    print(json.dumps({
        "held_bytes": hold,
        "mem_total_bytes": total,
        "available_bytes": meminfo("MemAvailable"),
    }), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    time.sleep(args.seconds)


if __name__ == "__main__":
    main()
