/*
 * The application's arrays as a data set: described without a copy, every value checked once
 * (the message names the array, row and column), and walked by the sampler and loader — the
 * staged batch converts its rows to f32, the indexed batch points into the arrays.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

#define N 10
#define DIM 3
#define TD 2

static double x[N * DIM], t[N * TD];
static int32_t y[N];

static void fill(void)
{
        for (int i = 0; i < N * DIM; i++)
                x[i] = 0.1 * i + 1e-9; /* not exactly an f32: the conversion rounds */
        for (int i = 0; i < N * TD; i++)
                t[i] = -0.5 * i;
        for (int i = 0; i < N; i++)
                y[i] = i % 4;
}

Test(arrays, bad_arrays_are_refused_with_a_message, .init = fill)
{
        struct strata_dataset ds = { 0 }, keep;

        memset(&keep, 0, sizeof(keep));
        cr_assert_eq(strata_dataset_arrays(&ds, NULL, STRATA_F64, N, DIM, t, STRATA_F64, TD),
                     STRATA_EINVAL);
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, 0, DIM, t, STRATA_F64, TD),
                     STRATA_EINVAL);
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_BF16, N, DIM, t, STRATA_F64, TD),
                     STRATA_EINVAL);
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, N, DIM, y, STRATA_I32, 2),
                     STRATA_EINVAL);
        x[4 * DIM + 2] = NAN;
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, N, DIM, t, STRATA_F64, TD),
                     STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "inputs row 4, column 2"), "%s",
                  strata_last_error());
        x[4 * DIM + 2] = 0.0;
        t[7 * TD + 1] = -INFINITY;
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, N, DIM, t, STRATA_F64, TD),
                     STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "targets row 7, column 1"), "%s",
                  strata_last_error());
        y[3] = -1;
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, N, DIM, y, STRATA_I32, 1),
                     STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "row 3"), "%s", strata_last_error());
        cr_assert_eq(memcmp(&ds, &keep, sizeof(ds)), 0, "a refused call wrote the data set");
}

/* A shuffled epoch of rank 1 of 2: each batch holds the sampler's rows, converted. */
Test(arrays, sampler_and_loader_walk_the_arrays, .init = fill)
{
        static _Alignas(64) unsigned char mem[1 << 14];
        struct strata_dataset ds, dl;
        struct strata_sampler s;
        struct strata_loader l, ll;
        struct strata_arena a;
        struct strata_batch b, bi, bl;
        uint32_t seen = 0;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_arrays(&ds, x, STRATA_F64, N, DIM, t, STRATA_F64, TD),
                     STRATA_OK);
        cr_assert_eq(strata_dataset_arrays(&dl, x, STRATA_F64, N, DIM, y, STRATA_I32, 1),
                     STRATA_OK);
        cr_assert_eq(dl.classes, 4);
        cr_assert_eq(strata_sampler_init(&s, &a, N, 2, 1, 1, 0, 7), STRATA_OK);
        strata_sampler_set_epoch(&s, 3);
        cr_assert_eq(strata_loader_init(&l, &a, &ds, 2, 0), STRATA_OK);
        cr_assert_eq(strata_loader_init(&ll, &a, &dl, 2, 0), STRATA_OK);
        cr_assert_eq(strata_loader_reset(&l, s.indices, s.per_rank), STRATA_OK);
        cr_assert_eq(strata_loader_reset(&ll, s.indices, s.per_rank), STRATA_OK);
        while (strata_loader_next(&l, &b)) {
                cr_assert(strata_loader_next(&ll, &bl));
                for (int r = 0; r < b.rows; r++, seen++) {
                        uint32_t i = s.indices[seen];

                        for (int k = 0; k < DIM; k++)
                                cr_assert_eq(((const float *)b.x)[r * DIM + k],
                                             (float)x[i * DIM + k]);
                        for (int k = 0; k < TD; k++)
                                cr_assert_eq(((const float *)b.t)[r * TD + k],
                                             (float)t[i * TD + k]);
                        cr_assert_eq(bl.y[r], y[i]);
                        cr_assert_null(bl.t);
                }
        }
        cr_assert_eq(seen, s.per_rank);
        cr_assert_eq(strata_loader_reset(&l, s.indices, s.per_rank), STRATA_OK);
        cr_assert(strata_loader_next_indexed(&l, &bi));
        cr_assert_eq((const void *)bi.x, (const void *)x, "indexed batches point at the arrays");
        cr_assert_eq(bi.xtype, STRATA_F64);
        cr_assert_eq(bi.t, (const void *)t);
        cr_assert_eq(bi.index, s.indices);
        cr_assert_eq(bi.nimages, N);
}
