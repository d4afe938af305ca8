#!/usr/bin/env python3
"""Reference vectors for the host test, computed with Python integers (independent of the
C code): records of (a, b, a*b*R^-1 mod p, a*a*R^-1 mod p), each 12 little-endian u32."""
import random, struct, sys

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 1 << 384
RINV = pow(R, -1, P)

def mont(a, b):
    return a * b * RINV % P

def words(x):
    return struct.pack('<12I', *[(x >> (32 * i)) & 0xffffffff for i in range(12)])

def main():
    n = int(sys.argv[1]); seed = int(sys.argv[2]); out = sys.argv[3]
    rng = random.Random(seed)
    edges = [0, 1, 2, R % P, P - 1, P - 2, P - R % P, (P - 1) // 2, (P + 1) // 2, 1 << 380,
             (1 << 352) - 1, P - (1 << 32), P - (1 << 200) - 1, (1 << 32) - 1, (1 << 64) - 1,
             R * R % P, P - 3 - (1 << 351), (1 << 381) - 1 - P]
    recs = []
    for a in edges:
        for b in edges:
            recs.append((a, b))
    def rnd():
        c = rng.randrange(8)
        if c == 0: return P - 1 - rng.getrandbits(rng.randrange(1, 200))   # near p
        if c == 1: return rng.getrandbits(rng.randrange(1, 380))            # small
        if c == 2:  # long runs of 0xffffffff / 0 limbs
            x = 0
            for i in range(12): x |= rng.choice([0, 0xffffffff, rng.getrandbits(32)]) << (32 * i)
            return x % P
        return rng.randrange(P)
    for i in range(n):
        a = rnd()
        b = a if i % 16 == 0 else rnd()
        recs.append((a, b))
    with open(out, 'wb') as f:
        f.write(struct.pack('<Q', len(recs)))
        for a, b in recs:
            assert 0 <= a < P and 0 <= b < P
            f.write(words(a) + words(b) + words(mont(a, b)) + words(mont(a, a)))
    print(f"wrote {len(recs)} records ({len(edges)}x{len(edges)} edge pairs + {n} random), seed {seed}")

main()
