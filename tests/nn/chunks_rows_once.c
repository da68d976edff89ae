/*
 * Invariant mode's shortcut (nn/chunks.c, issue 43 item 5): a Linear's f32 forward and input
 * gradient run once over the device's rows where the kernels give a row the bits of its
 * chunk's call: with every CPU kernel set one GEMM over the rows, bitwise the chunks' results;
 * with a GEMM whose rows round by the call's row count the probe sees it, keeps one call per
 * chunk and the chunks' bits; a batch of another size is probed again.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "nn/chunks.h"

#define IN 40
#define OUT 24
#define ROWS 64
#define CHUNKS 8
#define NPARAM (IN * OUT + OUT)

static const struct strata_kernel_ops *cpu;
static struct strata_kernel_ops wrapped; /* the CPU's, with a counting (or skewed) GEMM */
static int skew;                         /* the GEMM rounds rows apart from a chunk's size up */
static int calls[ROWS + 1];              /* GEMMs by their m */
static int seen[ROWS + 1];               /* calls of the last step's passes */

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
        cpu->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        calls[m <= ROWS ? m : 0]++;
        if (skew && m > ROWS / CHUNKS) /* one ulp on each row's first element */
                for (int i = 0; i < m; i++)
                        c[(size_t)i * ldc] = nextafterf(c[(size_t)i * ldc], INFINITY);
}

static float x[ROWS * IN], dy[ROWS * OUT], w[NPARAM], grad[NPARAM];
static float y[ROWS * OUT], dx[ROWS * IN], yref[ROWS * OUT], dxref[ROWS * IN];
static _Alignas(64) unsigned char mem[1 << 20];
static struct strata_chunks ch;
static struct strata_module mod = { .ops = &strata_linear, .out = OUT };
static struct strata_layer l;
static struct strata_step_ctx c;

static void fill(float *p, size_t n, unsigned s)
{
        for (size_t i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                p[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
        }
}

/* One device of one, CHUNKS chunks of @p rows rows, a Linear IN -> OUT, the GEMM wrapped. */
static void setup(int with_skew, int rows)
{
        struct strata__chunk_plan cp;
        struct strata_arena a;
        const struct strata_device_ops *d;
        static void *buf;
        int row0, nrows;

        cr_assert_eq(strata__cpu_driver_for(STRATA_KERNELS_NATIVE, &d), STRATA_OK);
        cr_assert_eq(d->prepare(1), STRATA_OK);
        if (!buf)
                buf = aligned_alloc(64, (d->scratch_bytes() + 63) / 64 * 64);
        cr_assert_not_null(buf);
        d->warm_up(buf); /* this thread packs as a device's does */
        cpu = d->kernels;
        wrapped = *cpu;
        wrapped.gemm = gemm;
        skew = with_skew;
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        strata__chunks_plan(CHUNKS, 1, ROWS, &cp);
        cr_assert_eq(strata__chunks_layout(&ch, &a, &a, &cp, 1, NPARAM, IN), STRATA_OK);
        ch.k = &wrapped;
        strata__chunks_layer(&ch, 0, 0, strata__linear_input_grad);
        strata__chunks_set(&ch, rows, CHUNKS, 0, 1, &row0, &nrows);
        cr_assert_eq(nrows, rows);
        fill(x, ROWS * IN, 1);
        fill(dy, ROWS * OUT, 2);
        fill(w, NPARAM, 3);
        l = (struct strata_layer){ .desc = &mod, .in = IN, .out = OUT, .param = w, .grad = grad,
                                   .nparam = NPARAM, .grad_fresh = 1 };
        c = (struct strata_step_ctx){ .k = &wrapped, .train = 1, .world = 1,
                                      .compute = STRATA_F32, .x_type = STRATA_F32,
                                      .y_type = STRATA_F32, .chunks = &ch };
}

/* The chunks' results: the Linear's own forward and input gradient, once per chunk. */
static void reference(void)
{
        struct strata_step_ctx cc = c;

        cc.chunks = NULL;
        for (int j = 0; j < CHUNKS; j++) {
                int lo = ch.lo[j], n = ch.lo[j + 1] - lo;

                strata_linear.forward(&l, &cc, x + lo * IN, yref + lo * OUT, n);
                strata__linear_input_grad(&l, &cc, dy + lo * OUT, dxref + lo * IN, n);
        }
}

/* A forward and a backward through the chunks, the GEMMs counted. */
static void step(int rows)
{
        memset(calls, 0, sizeof(calls));
        memset(y, 0, sizeof(y));
        memset(dx, 0, sizeof(dx));
        strata__chunks_forward(&l, &c, x, y, rows);
        cr_assert_eq(strata__chunks_backward(&l, &c, x, y, dy, dx, rows), STRATA_OK);
        memcpy(seen, calls, sizeof(seen));
        reference();
        cr_assert_eq(memcmp(y, yref, sizeof(float) * rows * OUT), 0,
                     "forward: not the chunks' bits");
        cr_assert_eq(memcmp(dx, dxref, sizeof(float) * rows * IN), 0,
                     "input gradient: not the chunks' bits");
}

Test(chunks_rows_once, cpu_kernels_make_one_gemm_over_the_rows)
{
        setup(0, ROWS);
        step(ROWS); /* probed: one call over the rows, then each chunk's */
        cr_assert_eq(ch.whole_fwd[0], 1);
        cr_assert_eq(ch.whole_dx[0], 1);
        step(ROWS);
        /* the forward and the input gradient over all 64 rows; the weight gradient per chunk */
        cr_assert_eq(seen[ROWS], 2, "%d GEMMs over the rows", seen[ROWS]);
        cr_assert_eq(seen[ROWS / CHUNKS], 0, "%d GEMMs of a chunk's rows", seen[ROWS / CHUNKS]);
        cr_assert_eq(seen[OUT], CHUNKS, "%d weight gradients", seen[OUT]);
}

Test(chunks_rows_once, a_gemm_rounding_by_row_count_keeps_the_chunks_calls)
{
        setup(1, ROWS);
        step(ROWS);
        cr_assert_eq(ch.whole_fwd[0], -1);
        cr_assert_eq(ch.whole_dx[0], -1);
        step(ROWS);
        cr_assert_eq(seen[ROWS], 0, "a GEMM over the rows after the probe failed");
        cr_assert_eq(seen[ROWS / CHUNKS], 2 * CHUNKS, "%d GEMMs of a chunk's rows",
                     seen[ROWS / CHUNKS]);
}

Test(chunks_rows_once, a_batch_of_another_size_is_probed_again)
{
        int row0, nrows;

        setup(0, ROWS);
        step(ROWS);
        cr_assert_eq(ch.whole_fwd[0], 1);
        strata__chunks_set(&ch, ROWS / 2, CHUNKS, 0, 1, &row0, &nrows);
        cr_assert_eq(ch.whole_fwd[0], 0);
        cr_assert_eq(ch.whole_dx[0], 0);
        skew = 1; /* now it rounds rows apart: the probe must see it */
        step(ROWS / 2);
        cr_assert_eq(ch.whole_fwd[0], -1);
        cr_assert_eq(ch.whole_dx[0], -1);
}
