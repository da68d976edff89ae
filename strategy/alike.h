/*
 * The model calls that exchange no batch agreement, for a caller of the library that passes
 * every process the same sizes (rl/'s agents; decisions 0091, 0097): the one part of
 * strategy/ that rl/ reaches past the public API. Defined in strategy/runtime/models_api.c.
 */
#ifndef STRATA_STRATEGY_ALIKE_H
#define STRATA_STRATEGY_ALIKE_H

#include <stddef.h>

#include "strata/runtime.h"

/**
 * strata_models_predict_step() and strata_model_input_grad() for a caller of the library
 * that passes every process of the job the same sizes (rows, widths, the outputs' room; the
 * agents of rl/, from their configuration, which every process shares): these steps' checks
 * read no value of a batch without an index (its form and sizes, the outputs' room), so
 * every process's own verdict is every other's and none is exchanged (decision 0091; a
 * batch with an index, whose bounds are values, is agreed). Alone, the same calls.
 */
int strata__models_predict_alike(struct strata_runtime *rt, const int *models, int n,
                                 const struct strata_batch *b, float *const *out,
                                 size_t capacity);
int strata__models_input_grad_alike(struct strata_runtime *rt, int model,
                                    const struct strata_batch *b, const float *dout,
                                    size_t dout_count, float *dx, size_t capacity);

/**
 * strata_models_train_step() without metrics for the same callers: across processes, where
 * every value the batch's checks would refuse (an input or target that is not finite) makes a
 * gradient that is not finite instead (one output of MSE or given_gradient, a Linear first,
 * fp32, no allow_nonfinite), only the batch's sizes are checked and nothing is exchanged
 * before the steps (decision 0097): such a value is then the step's STRATA_ENONFINITE on every
 * process, nothing changed, where the public call refuses it with STRATA_EINVAL. Otherwise,
 * and in one process, the public call.
 */
int strata__models_train_alike(struct strata_runtime *rt, const int *models, int n,
                               const struct strata_batch *b);

#endif /* STRATA_STRATEGY_ALIKE_H */
