/*
 * strata__expd() (arch/expd.c, decision 0089), attention's softmax exponentials: libm's exp
 * bits for every argument, on the replica of glibc 2.36's exp and on the path this machine
 * takes: softmax-like arguments (differences of floats, <= 0), a wide range,
 * every power of two's neighbourhood, random bit patterns (NaN, infinities, subnormals) and
 * the boundaries of glibc's main path.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "arch/expd.h"

#define N 4099 /* not a multiple of a block */

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
}

static double unit(void)
{
        return (double)(next() >> 11) * 0x1p-53;
}

static double arg(int kind)
{
        uint64_t u = next();
        double v;

        switch (kind) {
        case 0: /* a score less its row's maximum */
                return (double)(float)(-20.0 * unit()) - (double)(float)(10.0 * unit());
        case 1:
                return 1500.0 * (unit() - 0.5);
        case 2:
                memcpy(&v, &u, sizeof(v));
                return v;
        default: /* near the main path's bounds, 2^-54 and 512, both signs */
                v = ldexp(1.0 + unit() * 0x1p-40, (int)(u % 4) < 2 ? -54 : 9) *
                    (1.0 - 0x1p-52 * (double)(u % 3));
                return u & 8 ? -v : v;
        }
}

static void check(void (*f)(double *, size_t), const char *name)
{
        static double x[N], y[N];

        for (int round = 0; round < 64; round++) {
                for (int i = 0; i < N; i++)
                        x[i] = arg(round % 4);
                x[round % N] = 0.0;
                x[(round * 3 + 5) % N] = -0.0;
                x[(round * 5 + 7) % N] = -0x1p-1060; /* subnormal */
                x[(round * 11 + 3) % N] = INFINITY;
                x[(round * 7 + 1) % N] = -INFINITY;
                x[(round * 13 + 2) % N] = NAN;
                memcpy(y, x, sizeof(y));
                f(y, N);
                for (int i = 0; i < N; i++) {
                        double e = exp(x[i]);

                        cr_assert(!memcmp(&e, &y[i], sizeof(e)), "%s: exp(%a) = %a, got %a",
                                  name, x[i], e, y[i]);
                }
        }
}

Test(softmax_exp, replica_has_libm_bits)
{
        if (strcmp(strata__expd_path(), "replica"))
                cr_skip_test("the replica is glibc 2.36's exp on FMA and AVX2: path %s here",
                             strata__expd_path());
        check(strata__expd_replica, "replica");
}

Test(softmax_exp, path_has_libm_bits)
{
        check(strata__expd, strata__expd_path());
}

Test(softmax_exp, path_named)
{
        cr_assert(!strcmp(strata__expd_path(), "replica") || !strcmp(strata__expd_path(), "libm"));
}
