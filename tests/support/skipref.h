/*
 * Skip connections' reference: a small graph model (Linear, ReLU, Tanh, Add, Concat over flat
 * rows) computed by hand in double, forward and backward under MSE, and the runtime's outputs
 * and gradients compared with it.
 */
#ifndef STRATA_TESTS_SKIPREF_H
#define STRATA_TESTS_SKIPREF_H

#include "strata/strata.h"

#define SKIPREF_ROWS 8
#define SKIPREF_WIDTH 48
#define SKIPREF_MODS 12
#define SKIPREF_PARAMS 4096

/** What the reference computed, every value in double. */
struct skipref {
        int n, rows, in, width[SKIPREF_MODS];
        /** a[0]: the input; a[i + 1]: module i's output, [rows, width] */
        double a[SKIPREF_MODS + 1][SKIPREF_ROWS * SKIPREF_WIDTH];
        /** the loss's gradient of the same */
        double d[SKIPREF_MODS + 1][SKIPREF_ROWS * SKIPREF_WIDTH];
        double grad[SKIPREF_PARAMS]; /**< the flat parameters' gradient */
        double loss;                 /**< mean squared error */
};

/**
 * Model @p m (its modules Linear, ReLU, Tanh, Add, Concat) with flat parameters @p p on @p rows
 * rows of @p x against targets @p t under MSE (mean over rows and outputs): forward, loss and
 * backward in double into @p r.
 */
void skipref_run(struct skipref *r, const struct strata_model *m, const float *p,
                 const float *x, const float *t, int rows);

/**
 * Model @p m on the single strategy: its predictions and its gradients (one micro-batch of an
 * accumulation window of two, so nothing is stepped) against skipref_run() on @p rows rows of
 * synthetic data, within @p tol relative to each tensor's largest value.
 */
void skipref_check(const struct strata_model *m, int rows, double tol);

#endif
