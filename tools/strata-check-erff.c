/*
 * strata-check-erff: the exact GELU's vectorised erff and expf (drivers/cpu/erff.c, decision
 * 0088) against this machine's libm on every float: all 2^32 bit patterns (both zeros,
 * subnormals, normals, both infinities, every NaN), compared bit for bit, NaNs included.
 * With --gelu, also the GELU forward and backward loops (dy = 1) against strata__act() and
 * strata__act_grad() with libm's calls, on every x (these run the library's path: the replica
 * under glibc 2.36, else libm). One thread; a mismatch is listed (the first 10 per function)
 * and the exit status is 1. Where this CPU lacks AVX2 or FMA, glibc runs its other expf and
 * the library calls libm itself: nothing to check, exit 0. Under another glibc, the erff and
 * expf lines tell whether the replica would have that libm's bits.
 *
 *   strata-check-erff [--gelu]
 */
#include <gnu/libc-version.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "drivers/formulas.h"
#include "drivers/cpu/erff.h"

#define CHUNK (1u << 20)

enum fn { ERFF, EXPF, GELU, GELU_GRAD, FNS };

static const char *const names[FNS] = { "erff", "expf", "gelu", "gelu backward" };

static float xs[CHUNK], got[CHUNK], ones[CHUNK];

static uint32_t bits(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

/* The libm value the replica must equal, by the library's own scalar expressions. */
static float want(enum fn f, float x)
{
        switch (f) {
        case ERFF: return erff(x);
        case EXPF: return expf(x);
        case GELU: return strata__act(STRATA_ACT_GELU, 0.0f, x);
        default: return strata__act_grad(STRATA_ACT_GELU, 0.0f, x, 0.0f, 1.0f);
        }
}

static void replica(enum fn f, size_t n)
{
        switch (f) {
        case ERFF: strata__cpu_erff_replica(xs, got, n); break;
        case EXPF: strata__cpu_expf_replica(xs, got, n); break;
        case GELU: strata__cpu_gelu(xs, got, n); break;
        default: strata__cpu_gelu_backward(xs, ones, got, n); break;
        }
}

/* Every bit pattern through @p f, a chunk at a time; the number of inputs that differ. */
static uint64_t check(enum fn f)
{
        uint64_t bad = 0;

        for (uint64_t base = 0; base < (1ull << 32); base += CHUNK) {
                for (uint32_t i = 0; i < CHUNK; i++) {
                        uint32_t u = (uint32_t)(base + i);

                        memcpy(&xs[i], &u, sizeof(u));
                }
                replica(f, CHUNK);
                for (uint32_t i = 0; i < CHUNK; i++) {
                        float w = want(f, xs[i]);

                        if (bits(w) == bits(got[i]))
                                continue;
                        if (bad++ < 10)
                                printf("  %s(%a) [0x%08x]: libm %a [0x%08x], replica %a "
                                       "[0x%08x]\n", names[f], xs[i], bits(xs[i]), w, bits(w),
                                       got[i], bits(got[i]));
                }
        }
        return bad;
}

int main(int argc, char **argv)
{
        int gelu = argc > 1 && !strcmp(argv[1], "--gelu");
        uint64_t total = 0;

        if (argc > 2 || (argc == 2 && !gelu)) {
                fprintf(stderr, "usage: strata-check-erff [--gelu]\n");
                return 2;
        }
        printf("glibc %s, path: %s\n", gnu_get_libc_version(), strata__cpu_erff_path());
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
                printf("no AVX2 or FMA: glibc runs its other expf, the library libm's calls\n");
                return 0;
        }
        for (uint32_t i = 0; i < CHUNK; i++)
                ones[i] = 1.0f;
        for (int f = 0; f < (gelu ? FNS : GELU); f++) {
                uint64_t bad = check((enum fn)f);

                printf("%s: 4294967296 inputs, %llu differ\n", names[f], (unsigned long long)bad);
                total += bad;
        }
        return total ? 1 : 0;
}
