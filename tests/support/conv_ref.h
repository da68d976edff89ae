/*
 * Convolution tests' rig: a table of geometries (1-D, 2-D, 3-D; every padding mode, stride,
 * dilation, 'same', odd sizes, no bias), one Conv layer of a case over static buffers, and
 * the reference: PyTorch's definitions (F.pad's modes, then the direct convolution loop) in
 * double.
 */
#ifndef STRATA_TESTS_CONV_REF_H
#define STRATA_TESTS_CONV_REF_H

#include "strata/strata.h"

/**
 * One geometry, every per-dimension value written out (outermost spatial dimension first).
 * The last case has more out channels than output positions (the forward's GEMM transposed).
 */
struct conv_case {
        const char *what;
        int nd, cin, cout, rows;
        int size[3], kernel[3], stride[3], dilation[3];
        int padding[3]; /**< per side, or STRATA_PADDING_SAME in every dimension */
        int mode;       /**< enum strata_padding_mode */
        int no_bias;
};

extern const struct conv_case conv_cases[];
extern const int conv_ncases;

/** A layer of a case with its buffers (the rig's static memory) and a step context. */
struct conv_rig {
        const struct conv_case *cc;
        struct strata_module desc;
        struct strata_model model;
        struct strata_layer l;
        struct strata_module_shape s;
        struct strata_step_ctx c;
        float *x, *y, *dy, *dx; /**< rows x in, rows x out, rows x out, rows x in */
        int lo[3], hi[3], out[3]; /**< the reference's padding and output extents */
};

/**
 * Case @p cc's layer: shape asserted to succeed, parameters initialised (seed 42) and
 * perturbed, x and dy filled with fixed values.
 */
void conv_rig_init(struct conv_rig *r, const struct conv_case *cc);

/**
 * Sample @p n's columns by the definition: [K x P], K = cin kernel-volume in the weight's
 * order, each the input value the position reads (its padding's), or 0.
 */
void conv_ref_cols(const struct conv_rig *r, int n, float *cols);

/** The reference forward of the rig's layer on its x, in double: rows x out into @p y. */
void conv_ref_forward(const struct conv_rig *r, double *y);

/**
 * The reference gradients for output gradient r->dy: the input's into @p dx (rows x in), the
 * weight's and bias's into @p dp (the layer's parameter layout).
 */
void conv_ref_backward(const struct conv_rig *r, double *dx, double *dp);

/** Largest |a - b| / (1 + |b|) of float results against double references. */
double conv_rel_err(const float *a, const double *b, size_t n);

#endif
