/*
 * The exact GELU's vectorised erff and expf (drivers/cpu/erff.c) have libm's bits: on random
 * bit patterns (every class of float: zeros, subnormals, normals, infinities, NaNs), on
 * random x in [-8, 8] (where erff's intervals are), in [-1, 1] and [-1.7, 1.7] (blocks that
 * reach only the first intervals, as a GELU's mostly do), on a run of floats either side of every
 * bound the replica selects by (erff's 2^-28 and 2^-120 guards, 0.84375, 1.25, 1/0.35, 6, inf;
 * expf's 88, overflow and two underflow bounds) and at the specials; and the CPU driver's
 * GELU forward and backward equal strata__act()/strata__act_grad() with libm's calls, each
 * element the same whatever its position in the call. (tools/strata-check-erff compares all
 * 2^32 floats; decision 0088.)
 */
#include <criterion/criterion.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/formulas.h"
#include "drivers/cpu/erff.h"

#define NRANDOM (1u << 21)
#define NRANGE (1u << 20)
#define NNEAR (1u << 18) /* x in [-1, 1] and in [-1.7, 1.7]: blocks of the first intervals only */
#define RUN 4096 /* floats each side of a bound */
#define NBOUND 12
#define NSPECIAL 12
#define N (NRANDOM + NRANGE + 2 * NNEAR + NBOUND * 4 * RUN + NSPECIAL)

static const uint32_t bounds[NBOUND] = {
        0x04000000, 0x31800000, 0x3f580000, 0x3fa00000, 0x4036db6e, 0x40c00000,
        0x7f800000, 0x42b00000, 0x42b17217, 0x42cff1b4, 0x42ce8ecf, 0x3f000000,
};

static const uint32_t specials[NSPECIAL] = {
        0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff,
        0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345,
};

static float xs[N], got[N], one[1], dys[N];

static uint32_t bits(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

static float from_bits(uint32_t u)
{
        float f;

        memcpy(&f, &u, sizeof(f));
        return f;
}

/* xorshift64*: a fixed sequence, so a failure repeats. */
static uint32_t next(uint64_t *s)
{
        *s ^= *s >> 12;
        *s ^= *s << 25;
        *s ^= *s >> 27;
        return (uint32_t)((*s * 0x2545f4914f6cdd1dull) >> 32);
}

static void fill(void)
{
        uint64_t s = 0x9e3779b97f4a7c15ull;
        size_t i = 0;

        for (uint32_t k = 0; k < NRANDOM; k++)
                xs[i++] = from_bits(next(&s));
        for (uint32_t k = 0; k < NRANGE; k++)
                xs[i++] = ((float)next(&s) * 0x1p-32f - 0.5f) * 16.0f;
        for (uint32_t k = 0; k < NNEAR; k++)
                xs[i++] = ((float)next(&s) * 0x1p-32f - 0.5f) * 2.0f;
        for (uint32_t k = 0; k < NNEAR; k++)
                xs[i++] = ((float)next(&s) * 0x1p-32f - 0.5f) * 3.4f;
        for (int b = 0; b < NBOUND; b++)
                for (int sign = 0; sign < 2; sign++)
                        for (int d = -RUN; d < RUN; d++)
                                xs[i++] = from_bits((bounds[b] + (uint32_t)d) |
                                                    (sign ? 0x80000000u : 0));
        for (int k = 0; k < NSPECIAL; k++)
                xs[i++] = from_bits(specials[k]);
        for (size_t k = 0; k < N; k++)
                dys[k] = (float)(k % 7) - 3.5f;
}

/* The first element whose bits differ from @p want's (N if none), with a message. */
static size_t first_miss(const char *what, float (*want)(size_t))
{
        for (size_t i = 0; i < N; i++) {
                float w = want(i);

                if (bits(w) != bits(got[i])) {
                        cr_log_error("%s(%a) [0x%08x]: libm 0x%08x, replica 0x%08x", what, xs[i],
                                     bits(xs[i]), bits(w), bits(got[i]));
                        return i;
                }
        }
        return N;
}

static float libm_erff(size_t i)
{
        return erff(xs[i]);
}

static float libm_expf(size_t i)
{
        return expf(xs[i]);
}

static float libm_gelu(size_t i)
{
        return strata__act(STRATA_ACT_GELU, 0.0f, xs[i]);
}

static float libm_gelu_grad(size_t i)
{
        return strata__act_grad(STRATA_ACT_GELU, 0.0f, xs[i], 0.0f, dys[i]);
}

static const struct strata_kernel_ops *kernels(void)
{
        const struct strata_device_ops *d;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &d), STRATA_OK);
        return d->kernels;
}

Test(cpu_erff, the_path_follows_glibcs_expf_build_and_version)
{
        int fma;

        __builtin_cpu_init();
        fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        cr_assert_str_eq(strata__cpu_erff_path(),
                         fma && !strcmp(gnu_get_libc_version(), "2.36") ? "replica" : "libm");
}

Test(cpu_erff, erff_and_expf_have_libms_bits)
{
        fill();
        strata__cpu_erff(xs, got, N);
        cr_expect_eq(first_miss("erff", libm_erff), N);
        strata__cpu_expf(xs, got, N);
        cr_expect_eq(first_miss("expf", libm_expf), N);
}

Test(cpu_erff, the_replica_has_libms_bits_where_it_runs)
{
        if (strcmp(strata__cpu_erff_path(), "replica"))
                cr_skip_test("the library calls libm here (no AVX2 or FMA, or not glibc 2.36)");
        fill();
        strata__cpu_erff_replica(xs, got, N);
        cr_expect_eq(first_miss("erff", libm_erff), N);
        strata__cpu_expf_replica(xs, got, N);
        cr_expect_eq(first_miss("expf", libm_expf), N);
}

Test(cpu_erff, gelu_kernels_have_the_formulas_bits)
{
        const struct strata_kernel_ops *k = kernels();

        fill();
        k->act(STRATA_ACT_GELU, 0.0f, xs, got, N);
        cr_expect_eq(first_miss("gelu", libm_gelu), N);
        k->act_backward(STRATA_ACT_GELU, 0.0f, xs, NULL, dys, got, N);
        cr_expect_eq(first_miss("gelu backward", libm_gelu_grad), N);
}

Test(cpu_erff, an_elements_bits_do_not_depend_on_its_position)
{
        const struct strata_kernel_ops *k = kernels();

        fill();
        k->act(STRATA_ACT_GELU, 0.0f, xs, got, N);
        for (size_t i = NRANDOM; i < NRANDOM + 4096; i++) {
                k->act(STRATA_ACT_GELU, 0.0f, xs + i, one, 1);
                cr_assert_eq(bits(one[0]), bits(got[i]), "x %a alone", xs[i]);
        }
        k->act_backward(STRATA_ACT_GELU, 0.0f, xs, NULL, dys, got, N);
        for (size_t i = NRANDOM + 3; i < NRANDOM + 4096; i += 5) {
                k->act_backward(STRATA_ACT_GELU, 0.0f, xs + i, NULL, dys + i, one, 1);
                cr_assert_eq(bits(one[0]), bits(got[i]), "x %a alone", xs[i]);
        }
}
