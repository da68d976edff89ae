/*
 * What the spatial modules share (internal): a layer's geometry over three dimensions and the
 * checks of a sample's layout, with the words of their messages (nn/spatial.c); MaxPool 2 x 2's
 * loops (nn/pool2x2.c); and MaxPool's backward with the ReLU before it, which the replica's
 * fused row loop calls (nn/pool.c). The modules, PyTorch semantics over samples laid out as
 * (C, D, H, W), the last fastest (struct strata_dims): MaxPool1d/2d/3d and AvgPool1d/2d/3d
 * (nn/pool.c), Upsample and Flatten (nn/upsample.c), LayerNorm (nn/norm.c).
 *
 * One ops table per PyTorch class: pooling has one per dimension, as PyTorch does, so a model
 * names what PyTorch names and a 2-D pool over a 1-D sample is refused by its shape; Upsample,
 * Flatten and LayerNorm are one class each in PyTorch and read the dimensions from l->in_dims.
 * Every loop runs over three dimensions: a sample of fewer has leading extents of 1 (kernel 1,
 * stride 1, no padding, scale 1 there), so one loop serves 1-D, 2-D and 3-D.
 *
 * Rows are independent (no batch_stats) and what a module keeps is per row (MaxPool's argmax,
 * LayerNorm's mean and 1/std), so invariant mode calls them once per chunk; activations stay
 * f32 under mixed precision (no bf16_io). Flatten copies through the kernels; the others
 * compute in loops over the layer's memory (host_loops), so they run where the host addresses
 * the device's memory (the CPU driver) and are refused on a driver with memory of its own.
 * Sums are taken in double (AvgPool, Upsample, LayerNorm) and gradients scattered onto an
 * input are added in an order fixed by the shapes alone: every result repeats bitwise. Loops
 * run a row of the last dimension at a time, their per-row arithmetic (window bounds, taps,
 * weights) hoisted out of the innermost loop.
 */
#ifndef STRATA_NN_SPATIAL_H
#define STRATA_NN_SPATIAL_H

#include <stddef.h>
#include <stdint.h>

#include "strata/nn.h"

/** A layer's geometry over three dimensions; the sample's nd dimensions are the last ones. */
struct strata__spatial {
        int nd;                         /**< the sample's spatial dimensions */
        int c;                          /**< channels */
        int in[STRATA_MAX_SPATIAL];     /**< input extents */
        int out[STRATA_MAX_SPATIAL];    /**< output extents */
        int k[STRATA_MAX_SPATIAL];      /**< pooling: kernel */
        int s[STRATA_MAX_SPATIAL];      /**< pooling: stride */
        int p[STRATA_MAX_SPATIAL];      /**< pooling: padding */
        int d[STRATA_MAX_SPATIAL];      /**< pooling: dilation */
        int up[STRATA_MAX_SPATIAL];     /**< Upsample: scale factor */
        double inv[STRATA_MAX_SPATIAL]; /**< Upsample: 1 / scale */
        size_t in_sp, out_sp;           /**< values of one channel */
};

/** Entry @p i of a per-dimension argument: past the first, 0 takes the first's value. */
static inline int strata__spatial_arg(const int *v, int i)
{
        return i > 0 && v[i] == 0 ? v[0] : v[i];
}

/** Slot of the sample's dimension @p i among the three. */
static inline int strata__spatial_slot(const struct strata__spatial *g, int i)
{
        return STRATA_MAX_SPATIAL - g->nd + i;
}

/** Layer @p l's sample of @p nd dimensions into @p g: every slot 1, scale 1 until filled. */
void strata__spatial_start(const struct strata_layer *l, int nd, struct strata__spatial *g);

/** The per-channel counts, once the output extents are set. */
void strata__spatial_counts(struct strata__spatial *g);

/** "3" when every dimension has 3 (and @p same), else "3 x 5": @p v over the sample's slots. */
const char *strata__spatial_fmt(char *buf, size_t n, const struct strata__spatial *g,
                                const int *v, int same);

/**
 * Layer @p l's input layout has @p nd spatial dimensions (0: any of 1..3) and holds @p in
 * values; else STRATA_EINVAL naming the module, what it needs (@p want) and what it got.
 */
int strata__spatial_check(const struct strata_layer *l, int in, int nd, const char *want);

/** The output width c * extents into @p out, or STRATA_EOVERFLOW past an int. */
int strata__spatial_width(const struct strata_layer *l, const struct strata__spatial *g,
                          int *out);

/** The output layout of @p g: its channels over its output extents. */
struct strata_dims strata__spatial_dims(const struct strata__spatial *g);

/**
 * 1 where pooling geometry @p g is MaxPool 2 x 2's of nn/pool2x2.c: kernel and stride 2, no
 * padding or dilation along the last two dimensions, 1 in front, an even width (rows of at
 * most 512 outputs).
 */
int strata__max2x2_fits(const struct strata__spatial *g);

/**
 * MaxPool 2 x 2's forward over @p rows rows of @p g's planes (strata__max2x2_fits()): each
 * output in @p y the first maximum of its window in scan order (a NaN wins), its index in the
 * channel in @p arg; the same bits in every form (AVX2's or C's).
 */
void strata__max2x2_forward(const struct strata__spatial *g, int rows, const float *x,
                            float *y, int32_t *arg);

/**
 * MaxPool 2 x 2's backward over @p rows rows onto the saved argmaxes @p arg: each output's
 * gradient @p dy, as 0 + dy, onto its argmax in @p dx and +0 on every other input (written,
 * not added). With @p gate (the pool's output y; NULL: none) only where y > 0: the ReLU before
 * the pool folded in, whose dx = relu_y > 0 ? dpool : 0 reads at each argmax relu_y = y, the
 * value the pool took, and elsewhere gives +0 either way (strata__maxpool_relu_backward()).
 */
void strata__max2x2_backward(const struct strata__spatial *g, const int32_t *arg,
                             const float *gate, const float *dy, float *dx, int rows);

/**
 * MaxPool 2 x 2 (stride 2, no padding, even width; module @p l, built-in MaxPool2d or 3d)
 * and the ReLU before it in one backward over @p rows rows: dx, the ReLU's input gradient,
 * from the pool's output @p y and output gradient @p dy, the same bits as the two backwards
 * in turn without reading the ReLU's output (decision 0109): it relies on the ReLU's
 * contract (struct strata_kernel_ops relu_backward: dy where y > 0, else +0). 0 (nothing
 * written) where @p l is another pool or geometry.
 */
int strata__maxpool_relu_backward(const struct strata_layer *l, const float *y,
                                  const float *dy, float *dx, int rows);

#ifdef STRATA_TESTING
/**
 * Tests only: @p on 1 makes MaxPool 2 x 2's forward and backward take their C loops even
 * where the CPU has AVX2 or AVX-512 (0: the CPU decides again), so that one machine checks
 * every form it has.
 */
void strata__maxpool_force_c(int on);
#endif

#endif /* STRATA_NN_SPATIAL_H */
