/*
 * Invariant mode's chunk tree in one GEMM (nn/chunks_wgrad.c, decision 0095): device 0 of 2,
 * four chunks of 16 rows (the default MLP's at batch 128), a Linear whose gradient is one
 * block of rows (100 -> 70) and one made in row blocks (512 -> 300): after the probes the
 * weight gradient is one gemm_tree() call and no per-chunk GEMM, bitwise the chunks' tree of
 * whole products, the bias and the input gradient too; a gemm_tree() that rounds apart is
 * refused by the probe and the per-chunk GEMMs stay; a batch of another size is probed again,
 * a tree the kernels refused at one size (STRATA_ENOTSUP: its rows past their buffer) too.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/drivers.h"
#include "nn/chunks.h"

#define IN_MAX 512
#define OUT_MAX 300
#define ROWS 128 /* the global batch: 64 rows on device 0 */
#define CHUNKS 8
#define NPARAM_MAX (IN_MAX * OUT_MAX + OUT_MAX)

static const struct strata_kernel_ops *cpu;
static struct strata_kernel_ops wrapped; /* the CPU's, counting (or skewing) */
static int skew;                         /* gemm_tree() rounds one element apart */
static int refuse;                       /* gemm_tree() refuses the shape: STRATA_ENOTSUP */
static int wgemms, trees;                /* weight-gradient GEMMs, gemm_tree() calls */

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
        cpu->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        wgemms += ta;
}

static int gemm_tree(const struct strata_gemm_tree *g)
{
        int rc = refuse ? STRATA_ENOTSUP : cpu->gemm_tree(g);

        trees++;
        if (skew && rc == STRATA_OK)
                g->c[0] = nextafterf(g->c[0], INFINITY);
        return rc;
}

static float x[ROWS * IN_MAX], dy[ROWS * OUT_MAX], w[NPARAM_MAX], grad[NPARAM_MAX];
static float ref[NPARAM_MAX], dx[ROWS * IN_MAX], dxref[ROWS * IN_MAX];
static _Alignas(64) unsigned char mem[8 << 20];
static struct strata_chunks ch;
static struct strata_module mod = { .ops = &strata_linear };
static struct strata_layer l;
static struct strata_step_ctx c;
static int in, out, nparam;

static void fill(float *p, size_t n, unsigned s)
{
        for (size_t i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                p[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
        }
}

/* Device 0 of 2, CHUNKS chunks of ROWS rows, a Linear @p i -> @p o, the kernels wrapped. */
static void setup(int i, int o, int with_skew)
{
        struct strata__chunk_plan cp;
        struct strata_arena a;
        const struct strata_device_ops *d;
        static void *buf;
        int row0, nrows;

        in = i;
        out = o;
        nparam = in * out + out;
        cr_assert_eq(strata__cpu_driver_for(STRATA_KERNELS_NATIVE, &d), STRATA_OK);
        cr_assert_eq(d->prepare(1), STRATA_OK);
        if (!buf)
                buf = aligned_alloc(64, (d->scratch_bytes() + 63) / 64 * 64);
        cr_assert_not_null(buf);
        d->warm_up(buf);
        cpu = d->kernels;
        wrapped = *cpu;
        wrapped.gemm = gemm;
        wrapped.gemm_tree = gemm_tree;
        skew = with_skew;
        refuse = 0;
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        strata__chunks_plan(CHUNKS, 2, ROWS, &cp);
        cr_assert_eq(strata__chunks_layout(&ch, &a, &a, &cp, 1, (size_t)nparam, in), STRATA_OK);
        ch.k = &wrapped;
        strata__chunks_layer(&ch, 0, 0, strata__linear_input_grad);
        strata__chunks_set(&ch, ROWS, CHUNKS, 0, 2, &row0, &nrows);
        cr_assert_eq(ch.n, 4);
        cr_assert_eq(ch.nb, 1);
        fill(x, ROWS * IN_MAX, 1);
        fill(dy, ROWS * OUT_MAX, 2);
        fill(w, NPARAM_MAX, 3);
        mod.out = out;
        l = (struct strata_layer){ .desc = &mod, .in = in, .out = out, .param = w,
                                   .grad = grad, .nparam = (size_t)nparam, .grad_fresh = 1 };
        c = (struct strata_step_ctx){ .k = &wrapped, .train = 1, .world = 2,
                                      .compute = STRATA_F32, .x_type = STRATA_F32,
                                      .y_type = STRATA_F32, .chunks = &ch };
        ch.whole_dx[0] = -1; /* every chunk's input gradient through the backward's pass */
}

/* A backward through the chunks of @p rows device rows into grad and dx, the calls counted. */
static void backward(int rows)
{
        wgemms = trees = 0;
        memset(grad, 0, sizeof(grad));
        memset(dx, 0, sizeof(dx));
        cr_assert_eq(strata__chunks_backward(&l, &c, x, NULL, dy, dx, rows), STRATA_OK);
}

/* The chunks' tree over whole products (no tree GEMM, no row blocks) into ref and dxref. */
static void reference(int rows)
{
        unsigned char keep = ch.linear[0];

        ch.linear[0] = (unsigned char)(STRATA__LIN_PAIRS_KNOWN | (keep & STRATA__LIN_PAIRS) |
                                       STRATA__LIN_ROWS_KNOWN | STRATA__LIN_TREE_KNOWN);
        backward(rows);
        cr_assert_eq(trees, 0);
        cr_assert_eq(wgemms, 4, "%d weight GEMMs over whole products", wgemms);
        memcpy(ref, grad, sizeof(ref));
        memcpy(dxref, dx, sizeof(dxref));
        ch.linear[0] = keep;
}

/* Two batches of probes, then one gemm_tree() call with the tree's bits. */
static void one_call(int i, int o)
{
        setup(i, o, 0);
        backward(ROWS / 2); /* the whole products; the row blocks' probe */
        cr_assert_eq(ch.linear[0] & STRATA__LIN_TREE_KNOWN, 0, "flags %x", ch.linear[0]);
        backward(ROWS / 2); /* the tree's probe */
        cr_assert_eq(trees, 1, "%d gemm_tree() calls in the probe", trees);
        cr_assert_eq(ch.linear[0] & STRATA__LIN_TREE, STRATA__LIN_TREE, "flags %x",
                     ch.linear[0]);
        reference(ROWS / 2);
        backward(ROWS / 2);
        cr_assert_eq(trees, 1, "%d gemm_tree() calls", trees);
        cr_assert_eq(wgemms, 0, "%d per-chunk weight GEMMs", wgemms);
        cr_assert_eq(memcmp(grad, ref, sizeof(float) * (size_t)nparam), 0,
                     "gemm_tree: not the chunks' tree's bits");
        cr_assert_eq(memcmp(dx, dxref, sizeof(dxref)), 0, "input gradient: not the chunks'");
}

Test(chunks_tree_gemm, one_block_layer_runs_in_one_call)
{
        one_call(100, 70);
}

Test(chunks_tree_gemm, row_blocked_layer_runs_in_one_call)
{
        one_call(IN_MAX, OUT_MAX);
        cr_assert_eq(ch.linear[0] & STRATA__LIN_ROWS, STRATA__LIN_ROWS, "flags %x",
                     ch.linear[0]);
}

Test(chunks_tree_gemm, a_tree_rounding_apart_keeps_the_chunks_gemms)
{
        setup(100, 70, 1);
        backward(ROWS / 2);
        backward(ROWS / 2);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_TREE_KNOWN | STRATA__LIN_TREE),
                     STRATA__LIN_TREE_KNOWN, "flags %x", ch.linear[0]);
        reference(ROWS / 2);
        backward(ROWS / 2);
        cr_assert_eq(trees, 0, "%d gemm_tree() calls after the probe failed", trees);
        cr_assert_eq(wgemms, 4, "%d per-chunk weight GEMMs", wgemms);
        cr_assert_eq(memcmp(grad, ref, sizeof(float) * (size_t)nparam), 0, "not the tree's bits");
}

/* A tree whose bits differed is not probed again at another size: one batch that happens to
 * match must not take it. */
Test(chunks_tree_gemm, a_tree_rounding_apart_stays_refused_at_another_size)
{
        int row0, nrows;

        setup(100, 70, 1);
        backward(ROWS / 2);
        backward(ROWS / 2);
        cr_assert_eq(trees, 1, "%d gemm_tree() calls in the probe", trees);
        skew = 0;
        strata__chunks_set(&ch, ROWS / 2, CHUNKS, 0, 2, &row0, &nrows);
        backward(ROWS / 4); /* another size: the whole products probed again, not the tree */
        cr_assert_eq(trees, 0, "%d gemm_tree() calls after the probe failed on bits", trees);
        backward(ROWS / 4);
        cr_assert_eq(trees, 0, "%d gemm_tree() calls after the probe failed on bits", trees);
}

Test(chunks_tree_gemm, a_batch_of_another_size_is_probed_again)
{
        int row0, nrows;

        one_call(100, 70);
        strata__chunks_set(&ch, ROWS / 2, CHUNKS, 0, 2, &row0, &nrows);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_TREE_KNOWN | STRATA__LIN_TREE), 0, "flags %x",
                     ch.linear[0]);
        backward(ROWS / 4); /* probed again: the whole products, then the tree */
        cr_assert_eq(trees, 1, "%d gemm_tree() calls in the probe", trees);
        cr_assert_eq(wgemms, 4, "%d per-chunk weight GEMMs", wgemms);
}

/*
 * A tree refused at the first batch's size (as the CPU's is where the device's rows pass its
 * buffer) is probed again at a batch of another size, and taken there.
 */
Test(chunks_tree_gemm, a_tree_refused_at_one_size_is_probed_again_at_another)
{
        int row0, nrows;

        setup(100, 70, 0);
        refuse = 1;
        backward(ROWS / 2);
        backward(ROWS / 2);
        cr_assert_eq(trees, 1, "%d gemm_tree() calls in the probe", trees);
        cr_assert_eq(ch.linear[0] & (STRATA__LIN_TREE_KNOWN | STRATA__LIN_TREE),
                     STRATA__LIN_TREE_KNOWN, "flags %x", ch.linear[0]);
        refuse = 0;
        strata__chunks_set(&ch, ROWS / 2, CHUNKS, 0, 2, &row0, &nrows);
        backward(ROWS / 4); /* the tree's probe, at this size */
        cr_assert_eq(trees, 1, "%d gemm_tree() calls in the probe", trees);
        cr_assert_eq(ch.linear[0] & STRATA__LIN_TREE, STRATA__LIN_TREE, "flags %x",
                     ch.linear[0]);
        reference(ROWS / 4);
        backward(ROWS / 4);
        cr_assert_eq(trees, 1, "%d gemm_tree() calls", trees);
        cr_assert_eq(wgemms, 0, "%d per-chunk weight GEMMs", wgemms);
        cr_assert_eq(memcmp(grad, ref, sizeof(float) * (size_t)nparam), 0, "not the tree's bits");
}
