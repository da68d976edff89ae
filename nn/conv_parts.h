/*
 * The convolutions' internals (Conv1d/2d/3d): what their three files share, and what a tool
 * measures as the module runs it. nn/conv.c holds the geometry, the shapes and the module's
 * passes; nn/conv_cols.c unfolds a sample into its columns and folds their gradient back
 * (im2col, col2im, and the padded copies of stride 1); nn/conv_small.c computes the small
 * products in the GEMM contract's own chains.
 */
#ifndef STRATA_NN_CONV_PARTS_H
#define STRATA_NN_CONV_PARTS_H

#include <stddef.h>

/** One convolution's geometry, as 3-D: dimension 3 - nd + i is spatial dimension i. */
struct strata__conv_geom {
        int nd;                     /**< spatial dimensions of the module: 1, 2, 3 */
        int cin, cout;              /**< input and output channels */
        int in[3], out[3];          /**< extents */
        int k[3], s[3], d[3];       /**< kernel, stride, dilation */
        int lo[3], hi[3];           /**< padding before and after */
        int mode;                   /**< enum strata_padding_mode */
        int bias;                   /**< a bias group follows the weight */
        size_t kvol, in_sp, out_sp; /**< kernel volume, input and output positions */
        size_t kk;                  /**< K = cin * kvol: rows of a sample's columns */
};

/** Reductions up to this many terms run in nn/conv_small.c (one KB block of the GEMM). */
#define STRATA__CONV_SMALL_K 16

/** Most values of one padded channel the column passes keep on the stack. */
#define STRATA__CONV_PAD_STACK 4096

/*
 * ---- The direct path: a small product with stride 1 reads a padded copy of the input ----
 *
 * With stride 1, output position (od, oh, ow) and kernel offset (a, b, e) read the padded
 * input at (od + a d, oh + b d, ow + e d): a shifted view. So instead of unfolding K columns
 * of P positions, the forward writes each sample's input once more with its padding (through
 * the padding mode's source, so every mode) into the sample's saved values, and the forward
 * product and the weight gradient read the K shifted views of it: what the columns held,
 * element for element, in the same order of every chain (the small products' and the GEMM's),
 * so the same bits. It runs where the products run directly (fp32, K <= STRATA__CONV_SMALL_K,
 * a small weight gradient) and the padded copy fits the columns' place; the column gradient
 * (a layer that is not the first) overwrites a sample's copy once its weight gradient is done.
 */

/** A sample's padded copy, stride 1. */
struct strata__conv_pad {
        int e[3];     /**< padded extents */
        size_t plane; /**< values of one padded channel */
};

/** Offset in the padded copy of row r = (c, a, b, e) of the columns (the weight's order). */
static inline size_t strata__conv_tap_at(const struct strata__conv_geom *g,
                                             const struct strata__conv_pad *pd, size_t r)
{
        size_t e = r % (size_t)g->k[2], b = r / g->k[2] % (size_t)g->k[1];
        size_t a = r / ((size_t)g->k[2] * g->k[1]) % (size_t)g->k[0], c = r / g->kvol;

        return c * pd->plane + ((a * g->d[0] * pd->e[1]) + b * g->d[1]) * pd->e[2] +
               e * g->d[2];
}

/** Offset in the padded copy of the first position of output line (od, oh). */
static inline size_t strata__conv_line_at(const struct strata__conv_pad *pd, int od, int oh)
{
        return ((size_t)od * pd->e[1] + (size_t)oh) * pd->e[2];
}

/* ---- nn/conv_cols.c: a sample's columns ---- */

/** im2col: sample @p x unfolded into its columns @p cols ([K x P]), every padding mode. */
void strata__conv_im2col(const struct strata__conv_geom *g, const float *x, float *cols);

/**
 * col2im: columns' gradient @p cols ([K x P], or [P x K] with @p trans) added onto @p dx (a
 * sample's input gradient, zeroed by the caller) in position order.
 */
void strata__conv_col2im(const struct strata__conv_geom *g, float *dx, float *cols, int trans);

/** A stride of 1 everywhere: the padded extents into @p pd (1), else 0. */
int strata__conv_pad_of(const struct strata__conv_geom *g, struct strata__conv_pad *pd);

/** Sample @p x with its padding into @p xp (cin padded planes), through the padding mode. */
void strata__conv_pad_sample(const struct strata__conv_geom *g,
                             const struct strata__conv_pad *pd, const float *x, float *xp);

/**
 * im2col of a stride-1 convolution through a padded copy of one channel at a time on the
 * stack (at most STRATA__CONV_PAD_STACK values): the same values as strata__conv_im2col().
 */
void strata__conv_im2col_padded(const struct strata__conv_geom *g,
                                const struct strata__conv_pad *pd, const float *x, float *cols);

/**
 * col2im of a stride-1 convolution with zero padding onto a padded plane of one channel at a
 * time on the stack, writing @p dx: the same bits as strata__conv_col2im() onto zeros.
 */
void strata__conv_col2im_padded(const struct strata__conv_geom *g,
                                const struct strata__conv_pad *pd, const float *cols,
                                int trans, float *dx);

/* ---- nn/conv_small.c: products of at most STRATA__CONV_SMALL_K terms ---- */

/**
 * out[i][q] = sum_r a[i ai + r ar] b[r][q] (+ bias[i]), i < @p ni, q < @p p, r < @p nr
 * (<= STRATA__CONV_SMALL_K, one chunk): the forward product (a = W) and the column gradient
 * (a = W^T).
 */
void strata__conv_small_product(const float *a, size_t ai, size_t ar, int ni, int nr,
                                const float *b, int p, const float *bias, float *out);

/**
 * dW[o][k] = (@p fresh ? 0 : dW[o][k]) + sum_q dy[o][q] cols[k][q], the GEMM's chains over q
 * in chunks of its KC, each chunk's sum added in chunk order.
 */
void strata__conv_small_wgrad(const float *dy, const float *cols, int co, int kk, int p,
                              int fresh, float *dw);

/** strata__conv_small_product()'s forward on the shifted views of padded copy @p xp. */
void strata__conv_direct_forward(const struct strata__conv_geom *g,
                                 const struct strata__conv_pad *pd, const float *restrict w,
                                 const float *restrict bias, const float *restrict xp,
                                 float *restrict y);

/** strata__conv_small_wgrad() on the views of sample copy @p xp: the same chains and order. */
void strata__conv_direct_wgrad(const struct strata__conv_geom *g,
                               const struct strata__conv_pad *pd, const float *dy,
                               const float *xp, int fresh, float *dw);

/* ---- nn/conv.c ---- */

/**
 * Whether a convolution's GEMM whose result is an [@p m x @p n] matrix runs as its transpose
 * (the orientation whose last panel of columns is less empty; with @p plain, the forward's
 * rule, only where that saves more than an eighth of the tiles). Either way the same bits.
 */
int strata__conv_transposed(size_t m, size_t n, int plain);

#endif
