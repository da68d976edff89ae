/*
 * Invariant mode's row blocks (nn/chunks_wgrad.c, decision 0092): a wide Linear's weight
 * gradient over the chunks made a block of output rows at a time, bitwise the chunks' tree
 * over whole products, with the bias and the input gradient; with a GEMM whose blocks round
 * apart from the whole product the probe sees it and keeps the whole products; a batch of
 * another size is probed again.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "nn/chunks.h"

#define IN 512   /* blocks of 128 output rows */
#define OUT 300  /* three blocks: 128, 128 and 44 rows */
#define ROWS 64
#define CHUNKS 8
#define NPARAM (IN * OUT + OUT)

static const struct strata_kernel_ops *cpu;
static struct strata_kernel_ops wrapped; /* the CPU's, with a counting (or skewed) GEMM */
static int skew;                         /* a weight gradient's block rounds apart */
static int blocks;                       /* weight-gradient GEMMs over fewer than OUT rows */

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
        cpu->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        if (!ta || m >= OUT)
                return;
        blocks++;
        if (skew) /* one ulp on each row's first element */
                for (int i = 0; i < m; i++)
                        c[(size_t)i * ldc] = nextafterf(c[(size_t)i * ldc], INFINITY);
}

static float x[ROWS * IN], dy[ROWS * OUT], w[NPARAM], grad[NPARAM], ref[NPARAM];
static float got[NPARAM], dx[ROWS * IN], dxref[ROWS * IN];
static _Alignas(64) unsigned char mem[8 << 20];
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

/* One device of one, CHUNKS chunks of ROWS rows, a Linear IN -> OUT, the GEMM wrapped. */
static void setup(int with_skew)
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
        d->warm_up(buf);
        cpu = d->kernels;
        wrapped = *cpu;
        wrapped.gemm = gemm;
        skew = with_skew;
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        strata__chunks_plan(CHUNKS, 1, ROWS, &cp);
        cr_assert_eq(strata__chunks_layout(&ch, &a, &a, &cp, 1, NPARAM, IN), STRATA_OK);
        ch.k = &wrapped;
        strata__chunks_layer(&ch, 0, 0, strata__linear_input_grad);
        strata__chunks_set(&ch, ROWS, CHUNKS, 0, 1, &row0, &nrows);
        fill(x, ROWS * IN, 1);
        fill(dy, ROWS * OUT, 2);
        fill(w, NPARAM, 3);
        l = (struct strata_layer){ .desc = &mod, .in = IN, .out = OUT, .param = w, .grad = grad,
                                   .nparam = NPARAM, .grad_fresh = 1 };
        c = (struct strata_step_ctx){ .k = &wrapped, .train = 1, .world = 1,
                                      .compute = STRATA_F32, .x_type = STRATA_F32,
                                      .y_type = STRATA_F32, .chunks = &ch };
        ch.whole_dx[0] = -1; /* every chunk's input gradient through the backward's pass */
}

/* A backward through the chunks over @p rows rows into grad and dx, its block GEMMs counted. */
static void backward(int rows)
{
        blocks = 0;
        memset(grad, 0, sizeof(grad));
        memset(dx, 0, sizeof(dx));
        cr_assert_eq(strata__chunks_backward(&l, &c, x, NULL, dy, dx, rows), STRATA_OK);
}

/* The chunks' tree over whole products (the row blocks set aside), into ref and dxref. */
static void reference(int rows)
{
        unsigned char keep = ch.linear[0];
        int k = skew;

        skew = 0;
        ch.linear[0] = (unsigned char)((keep | STRATA__LIN_ROWS_KNOWN) & ~STRATA__LIN_ROWS);
        backward(rows);
        cr_assert_eq(blocks, 0, "%d block GEMMs without the row blocks", blocks);
        memcpy(ref, grad, sizeof(ref));
        memcpy(dxref, dx, sizeof(dxref));
        ch.linear[0] = keep;
        skew = k;
}

Test(chunks_wgrad, cpu_kernels_make_the_weight_gradient_in_row_blocks)
{
        setup(0);
        backward(ROWS); /* the whole products, then the probe */
        cr_assert_eq(ch.linear[0] & STRATA__LIN_ROWS, STRATA__LIN_ROWS, "flags %x",
                     ch.linear[0]);
        reference(ROWS);
        backward(ROWS);
        /* three blocks, one product per chunk each (a chunk onto its sibling's or apart) */
        cr_assert_eq(blocks, 3 * CHUNKS, "%d block GEMMs", blocks);
        cr_assert_eq(memcmp(grad, ref, sizeof(ref)), 0, "row blocks: not the tree's bits");
        cr_assert_eq(memcmp(dx, dxref, sizeof(dxref)), 0, "input gradient: not the chunks'");
}

Test(chunks_wgrad, blocks_rounding_apart_keep_the_whole_products)
{
        setup(1);
        backward(ROWS);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_ROWS_KNOWN | STRATA__LIN_ROWS),
                     STRATA__LIN_ROWS_KNOWN, "flags %x", ch.linear[0]);
        reference(ROWS);
        backward(ROWS);
        cr_assert_eq(blocks, 0, "%d block GEMMs after the probe failed", blocks);
        cr_assert_eq(memcmp(grad, ref, sizeof(ref)), 0, "not the tree's bits");
}

Test(chunks_wgrad, a_batch_of_another_size_is_probed_again)
{
        int row0, nrows;

        setup(0);
        backward(ROWS);
        cr_assert_eq(ch.linear[0] & STRATA__LIN_ROWS, STRATA__LIN_ROWS);
        strata__chunks_set(&ch, ROWS / 2, CHUNKS, 0, 1, &row0, &nrows);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_ROWS_KNOWN | STRATA__LIN_ROWS), 0);
        skew = 1; /* now the blocks round apart: the probe must see it */
        backward(ROWS / 2);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_ROWS_KNOWN | STRATA__LIN_ROWS),
                     STRATA__LIN_ROWS_KNOWN, "flags %x", ch.linear[0]);
        memcpy(got, grad, sizeof(got));
        skew = 0;
        reference(ROWS / 2);
        cr_assert_eq(memcmp(got, ref, sizeof(ref)), 0, "not the tree's bits");
}
