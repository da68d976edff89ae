/* One module called directly through its ops table, on the CPU driver's kernels. */
#ifndef STRATA_TESTS_MODCALL_H
#define STRATA_TESTS_MODCALL_H

#include "strata/strata.h"

/** Most floats of a module's parameters, gradients, aux or one buffer in these tests. */
#define MODCALL_MAX 8192

/** A module instance of index 3 with its own buffers, as the replica would lay it out. */
struct modcall {
        struct strata_module desc;
        struct strata_layer l;
        struct strata_module_shape s;
        struct strata_step_ctx c;
        float param[MODCALL_MAX], grad[MODCALL_MAX], aux[MODCALL_MAX];
};

/** Values of layout @p d (channels times its extents). */
int modcall_count(struct strata_dims d);

/**
 * Shape @p desc's module over an input of layout @p in as module 3; on success the layer
 * gets its sizes, buffers and a training context, and its init has run. Returns the shape's
 * status (its message in strata_last_error()).
 */
int modcall_shape(struct modcall *m, const struct strata_module *desc, struct strata_dims in);

/** modcall_shape(), asserted to succeed, for @p rows rows (asserted to fit the buffers). */
void modcall_init(struct modcall *m, const struct strata_module *desc, struct strata_dims in,
                  int rows);

/** x[i] = sin(a i + b): distinct values (ties only where the sine repeats). */
void modcall_wave(float *x, int n, double a, double b);

/** Largest |a - b| / (1 + |b|) of @p n values. */
double modcall_rel_diff(const float *a, const double *b, int n);

/** A pooling case in the sample's own dimensions: channels, extents and the arguments. */
struct pool_case {
        const struct strata_module_ops *ops;
        int nd, c, in[3], k[3], s[3], p[3], d[3]; /* d 0: 1 */
};

/** Output extent @p i of case @p t: floor((in + 2 p - d (k - 1) - 1) / s) + 1. */
int pool_case_out(const struct pool_case *t, int i);

/**
 * The case's module (padding 0 written STRATA_PADDING_NONE) as a layer for @p rows rows, its
 * output layout asserted; the values of one input and one output channel into @p ins, @p outs.
 */
void pool_case_layer(struct modcall *m, const struct pool_case *t, int rows, int *ins,
                     int *outs);

/** Output @p n of a channel of case @p t as its coordinates @p o (the sample's dimensions). */
void pool_case_coords(const struct pool_case *t, int n, int *o);

/**
 * Every case of @p ops over 1 to 3 dimensions with extents, kernels, strides, padding and
 * (@p dilate) dilations in small ranges that the module accepts, handed to @p run; how many.
 */
int pool_case_sweep(const struct strata_module_ops *const ops[3], int dilate,
                    void (*run)(const struct pool_case *t));

#endif /* STRATA_TESTS_MODCALL_H */
