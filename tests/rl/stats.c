/*
 * Running normalisation and exploration noise: Welford's statistics equal the two-pass mean
 * and variance; normalised values are clipped; Gaussian draws have the asked spread and repeat
 * by seed; an Ornstein-Uhlenbeck process follows its recursion and restarts at 0; a restored
 * state continues bitwise; bad values are refused with nothing changed.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/rl.h"
#include "strata/strata.h"
#include "rl/rl.h"

static struct strata_arena arena;
static unsigned char mem[1 << 20] __attribute__((aligned(64)));

static void fresh(void)
{
        cr_assert_eq(strata_arena_init(&arena, mem, sizeof(mem), NULL), STRATA_OK);
}

Test(rl_stats, welford_equals_two_pass_statistics, .init = fresh)
{
        struct strata_rl_normalizer nz;
        float x[100 * 2], out[2];
        double m[2] = { 0 }, v[2] = { 0 };
        size_t bytes;

        cr_assert_eq(strata_rl_normalizer_bytes(2, &bytes), STRATA_OK);
        cr_assert_eq(strata_rl_normalizer_init(&nz, &arena, 2, 0), STRATA_OK);
        cr_assert_eq(strata_arena_used(&arena), bytes);
        for (int i = 0; i < 100; i++) {
                x[2 * i] = (float)(i % 13) * 0.7f + 3.0f;
                x[2 * i + 1] = (float)((i * 7) % 11) - 40.0f;
        }
        cr_assert_eq(strata_rl_normalizer_update(&nz, x, 60), STRATA_OK);
        cr_assert_eq(strata_rl_normalizer_update(&nz, x + 120, 40), STRATA_OK);
        for (int i = 0; i < 100; i++)
                for (int d = 0; d < 2; d++)
                        m[d] += x[2 * i + d] / 100.0;
        for (int i = 0; i < 100; i++)
                for (int d = 0; d < 2; d++)
                        v[d] += (x[2 * i + d] - m[d]) * (x[2 * i + d] - m[d]) / 100.0;
        cr_assert_eq(strata_rl_normalizer_apply(&nz, x, out, 1), STRATA_OK);
        for (int d = 0; d < 2; d++)
                cr_assert(fabs(out[d] - (x[d] - m[d]) / sqrt(v[d] + 1e-8)) < 1e-5, "dim %d", d);
}

Test(rl_stats, normalised_values_are_clipped_and_bad_values_refused, .init = fresh)
{
        struct strata_rl_normalizer nz;
        float x[4] = { 0, 0, 1, 1 }, big = 1000, out, bad[2] = { 1, NAN };

        cr_assert_eq(strata_rl_normalizer_init(&nz, &arena, 1, 5), STRATA_OK);
        cr_assert_eq(strata_rl_normalizer_update(&nz, x, 4), STRATA_OK);
        cr_assert_eq(strata_rl_normalizer_apply(&nz, &big, &out, 1), STRATA_OK);
        cr_assert_eq(out, 5.0f);
        cr_assert_eq(strata_rl_normalizer_update(&nz, bad, 2), STRATA_ENONFINITE);
        cr_assert_not_null(strstr(strata_last_error(), "value[1]"), "%s", strata_last_error());
        cr_assert_eq(strata_rl_normalizer_apply(&nz, x + 2, &out, 1), STRATA_OK);
        cr_assert_float_eq(out, 1.0f, 1e-6, "the refused update folded nothing");
        cr_assert_eq(strata_rl_normalizer_init(&nz, &arena, 0, 0), STRATA_EINVAL);
        cr_assert_eq(strata_rl_normalizer_init(&nz, &arena, 1, -1), STRATA_EINVAL);
}

Test(rl_stats, gaussian_noise_has_its_spread_and_repeats_by_seed, .init = fresh)
{
        struct strata_rl_noise a, b, c;
        double sum = 0, sq = 0;
        int differ = 0;

        cr_assert_eq(strata_rl_noise_init(&a, &arena, 3, 2, 0, 0.2f, 0, 0, 1, 11), STRATA_OK);
        cr_assert_eq(strata_rl_noise_init(&b, &arena, 3, 2, 0, 0.2f, 0, 0, 1, 11), STRATA_OK);
        cr_assert_eq(strata_rl_noise_init(&c, &arena, 3, 2, 0, 0.2f, 0, 0, 1, 12), STRATA_OK);
        for (int k = 0; k < 4000; k++) {
                float x[3] = { 0 }, y[3] = { 0 }, z[3] = { 0 };

                cr_assert_eq(strata_rl_noise_add(&a, 1, x), STRATA_OK);
                cr_assert_eq(strata_rl_noise_add(&b, 1, y), STRATA_OK);
                cr_assert_eq(strata_rl_noise_add(&c, 1, z), STRATA_OK);
                cr_assert_eq(memcmp(x, y, sizeof(x)), 0);
                differ += memcmp(x, z, sizeof(x)) != 0;
                for (int i = 0; i < 3; i++) {
                        sum += x[i];
                        sq += (double)x[i] * x[i];
                }
        }
        cr_assert_gt(differ, 3990, "another seed, other draws");
        cr_assert(fabs(sum / 12000) < 0.01, "mean %g", sum / 12000);
        cr_assert(fabs(sqrt(sq / 12000) - 0.2) < 0.01, "sd %g", sqrt(sq / 12000));
}

Test(rl_stats, ou_noise_follows_its_recursion_and_restores, .init = fresh)
{
        struct strata_rl_noise ou, g, r;
        const void *st;
        void *saved;
        size_t bytes;
        double x = 0;

        /* the Gaussian of sigma 1, same seed, gives the normals the OU process is driven by */
        cr_assert_eq(strata_rl_noise_init(&ou, &arena, 1, 1, 1, 0.3f, 0.15f, 0.5f, 0.01f, 5),
                     STRATA_OK);
        cr_assert_eq(strata_rl_noise_init(&g, &arena, 1, 1, 0, 1.0f, 0, 0, 1, 5), STRATA_OK);
        cr_assert_eq(strata_rl_noise_init(&r, &arena, 1, 1, 1, 0.3f, 0.15f, 0.5f, 0.01f, 5),
                     STRATA_OK);
        for (int k = 0; k < 50; k++) {
                float a = 0, z = 0;

                cr_assert_eq(strata_rl_noise_add(&ou, 0, &a), STRATA_OK);
                cr_assert_eq(strata_rl_noise_add(&g, 0, &z), STRATA_OK);
                x = (float)(x + 0.15 * (0.5 - x) * 0.01 + 0.3 * sqrt(0.01) * z);
                cr_assert(fabs(a - x) < 1e-6, "step %d: %g, not %g", k, (double)a, x);
        }
        cr_assert_eq(strata_rl_state(&ou, STRATA_RL_NOISE, &st, &bytes), STRATA_OK);
        saved = malloc(bytes);
        memcpy(saved, st, bytes);
        cr_assert_eq(strata_rl_restore(&r, STRATA_RL_NOISE, saved, bytes), STRATA_OK);
        for (int k = 0; k < 10; k++) {
                float a = 0, b = 0;

                strata_rl_noise_add(&ou, 0, &a);
                strata_rl_noise_add(&r, 0, &b);
                cr_assert_eq(a, b, "step %d after the restore", k);
        }
        cr_assert_eq(strata_rl_noise_reset(&ou, 0), STRATA_OK);
        {
                float a = 0, z = 0, skip[1] = { 0 };

                for (int k = 0; k < 10; k++) /* g to ou's draw count */
                        strata_rl_noise_add(&g, 0, skip);

                strata_rl_noise_add(&ou, 0, &a);
                strata_rl_noise_add(&g, 0, &z);
                cr_assert(fabs(a - (0.15 * 0.5 * 0.01 + 0.03 * z)) < 1e-6, "from 0 again");
        }
        cr_assert_eq(strata_rl_noise_add(&ou, 1, &x == NULL ? NULL : (float[1]){ 0 }),
                     STRATA_EINVAL, "environment 1 of 1");
        cr_assert_eq(strata_rl_noise_init(&r, &arena, 1, 1, 1, 0.3f, 0.15f, 0, 0, 5),
                     STRATA_EINVAL, "dt 0");
        cr_assert_eq(strata_rl_noise_init(&r, &arena, 1, 1, 0, -1, 0, 0, 1, 5), STRATA_EINVAL);
        free(saved);
}

/* Decision 0101: a skipped draw (an mpi process's rows of another process) counts as an add, so
 * the next add is the same; Ornstein-Uhlenbeck's state moves as an add's; a bad range is
 * refused with nothing counted. */
Test(rl_stats, skipped_draws_count_as_adds, .init = fresh)
{
        struct strata_rl_noise a, b;
        float x[3 * 4], y[3 * 4];

        for (int ou = 0; ou < 2; ou++) {
                cr_assert_eq(strata_rl_noise_init(&a, &arena, 3, 4, ou, 0.2f, 0.15f, 0.1f,
                                                  0.01f, 9), STRATA_OK);
                cr_assert_eq(strata_rl_noise_init(&b, &arena, 3, 4, ou, 0.2f, 0.15f, 0.1f,
                                                  0.01f, 9), STRATA_OK);
                memset(x, 0, sizeof(x));
                memset(y, 0, sizeof(y));
                for (uint32_t e = 0; e < 4; e++)
                        cr_assert_eq(strata_rl_noise_add(&a, e, x + 3 * e), STRATA_OK);
                cr_assert_eq(strata__noise_skip(&b, 0, 1), STRATA_OK);
                cr_assert_eq(strata__noise_skip(&b, 1, 4), STRATA_OK);
                cr_assert_eq(strata__noise_skip(&b, 2, 5), STRATA_EINVAL);
                cr_assert_eq(strata__noise_skip(&b, 3, 2), STRATA_EINVAL);
                cr_assert_eq(strata__noise_skip(NULL, 0, 1), STRATA_EINVAL);
                memset(x, 0, sizeof(x));
                for (uint32_t e = 0; e < 4; e++) {
                        cr_assert_eq(strata_rl_noise_add(&a, e, x + 3 * e), STRATA_OK);
                        cr_assert_eq(strata_rl_noise_add(&b, e, y + 3 * e), STRATA_OK);
                }
                cr_assert_eq(memcmp(x, y, sizeof(x)), 0, "ou %d: the second draws differ", ou);
                cr_assert(x[0] != 0.0f);
        }
}
