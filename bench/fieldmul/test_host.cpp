// Host test: runs the host twins of every variant in variants.cuh (identical algorithms; the
// carry flag emulated in C, FP64 round-toward-zero via fesetround + fma) against Python-computed
// reference Montgomery products. Build and run through test_host.sh.
#include <cfenv>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "variants.cuh"

#pragma STDC FENV_ACCESS ON

struct Rec { u32 a[12], b[12], ab[12], aa[12]; };

static bool eq(const u32* x, const u32* y) {
    for (int i = 0; i < 12; i++) if (x[i] != y[i]) return false;
    return true;
}
static void dump(const char* tag, const u32* x) {
    printf("    %s = 0x", tag);
    for (int i = 11; i >= 0; i--) printf("%08x", x[i]);
    printf("\n");
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s vectors.bin\n", argv[0]); return 2; }
    FILE* f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    unsigned long long n = 0;
    if (fread(&n, 8, 1, f) != 1) return 2;
    std::vector<Rec> v(n);
    if (fread(v.data(), sizeof(Rec), n, f) != n) { fprintf(stderr, "short file\n"); return 2; }
    fclose(f);

    if (fesetround(FE_TOWARDZERO) != 0) { printf("FAIL: fesetround\n"); return 1; }
    // The FP64 variants need fma() to honour the rounding mode: 1*1 - 2^-60 rounds to 1.0
    // to nearest but to the double just below 1.0 toward zero.
    volatile double one = 1.0, tiny = -0x1p-60;
    if (!(fma(one, one, tiny) < 1.0)) { printf("FAIL: fma() does not round toward zero\n"); return 1; }

    int fails = 0;
    auto run = [&](const char* name, auto fn, bool sqr) {
        unsigned long long bad = 0, cnt = 0;
        for (unsigned long long i = 0; i < n; i++) {
            u32 r[12];
            if (sqr) {
                fn(r, v[i].a, v[i].a);
                cnt++;
                if (!eq(r, v[i].aa)) { if (bad++ < 3) { printf("  %s mismatch at %llu\n", name, i); dump("a", v[i].a); dump("got", r); dump("want", v[i].aa); } }
            } else {
                fn(r, v[i].a, v[i].b);
                cnt++;
                if (!eq(r, v[i].ab)) { if (bad++ < 3) { printf("  %s mismatch at %llu\n", name, i); dump("a", v[i].a); dump("b", v[i].b); dump("got", r); dump("want", v[i].ab); } }
                fn(r, v[i].a, v[i].a);  // a == b through the general product too
                cnt++;
                if (!eq(r, v[i].aa)) { if (bad++ < 3) { printf("  %s (a*a) mismatch at %llu\n", name, i); dump("a", v[i].a); dump("got", r); dump("want", v[i].aa); } }
            }
        }
        printf("%s %s: %llu checks, %llu mismatches\n", bad ? "FAIL" : "PASS", name, cnt, bad);
        if (bad) fails++;
    };
    run("V1 sqr (32-bit carry chains)", [](u32* r, const u32* a, const u32*) { fm::sqr_v1(r, a); }, true);
    run("V2 mul (28-bit, IMAD.WIDE)", [](u32* r, const u32* a, const u32* b) { fm::mul_v2(r, a, b); }, false);
    run("V3 mul (FP64, 48-bit)", [](u32* r, const u32* a, const u32* b) { fm::mul_v3(r, a, b); }, false);
    run("V4 sqr (28-bit, IMAD.WIDE)", [](u32* r, const u32* a, const u32*) { fm::sqr_v4(r, a); }, true);
    run("V5 sqr (FP64, 48-bit)", [](u32* r, const u32* a, const u32*) { fm::sqr_v5(r, a); }, true);
    fesetround(FE_TONEAREST);
    printf("%s (%llu vectors)\n", fails ? "FAIL" : "ALL PASS", n);
    return fails ? 1 : 0;
}
