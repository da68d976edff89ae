/* The losses (nn/loss.c, internal): which one a model trains with. */
#ifndef STRATA_NN_LOSS_H
#define STRATA_NN_LOSS_H

#include "strata/nn.h"

/** The loss of model @p m (softmax cross-entropy when it names none). */
const struct strata_loss_ops *strata__loss_of(const struct strata_model *m);

#endif /* STRATA_NN_LOSS_H */
