/* The losses (nn/loss.c, internal): which one a model trains with. */
#ifndef STRATA_NN_LOSS_H
#define STRATA_NN_LOSS_H

#include "strata/nn.h"

/**
 * The loss of model @p m (softmax cross-entropy when it names none); with several outputs
 * their first one's (all take float targets).
 */
const struct strata_loss_ops *strata__loss_of(const struct strata_model *m);

/**
 * A batch's targets for model @p m, @p outputs values a row: its loss's check, or with several
 * outputs (m->noutputs, each @p widths[k] values) float targets, finite, and in [0, 1] for the
 * outputs whose loss is BCE's.
 */
int strata__targets_check(const struct strata_model *m, const struct strata_batch *b,
                          int outputs, const int *widths);

#endif /* STRATA_NN_LOSS_H */
