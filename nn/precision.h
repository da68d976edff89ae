/*
 * Precision plugins (internal): one const table per plugin, chosen by cfg.precision.kind. A plugin
 * says what the GEMMs' operands are (strata_gemm() reads it through the step context) and
 * whether the loss is scaled; master weights, gradients and optimizer state stay f32.
 */
#ifndef STRATA_NN_PRECISION_H
#define STRATA_NN_PRECISION_H

#include "strata/nn.h"

struct strata__precision {
        const char *name;          /* Lightning's name */
        enum strata_dtype compute; /* GEMM operand type */
        /*
         * Dynamic loss scaling (NULL: none): after the found-inf decision every device
         * agreed on, grow or back off the scale.
         */
        void (*update)(struct strata_grad_scaler *s, int found_inf);
};

/** The plugin for @p p, or NULL when out of range. */
const struct strata__precision *strata__precision(enum strata_precision p);

/** A scaler at @p init (0: 65536) growing after @p interval (0: 2000) clean steps. */
void strata__scaler_init(struct strata_grad_scaler *s, float init, uint32_t interval);

#endif /* STRATA_NN_PRECISION_H */
