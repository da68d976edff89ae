/* The losses (nn/loss.c, internal): which one a model trains with. */
#ifndef STRATA_NN_LOSS_H
#define STRATA_NN_LOSS_H

#include "strata/nn.h"

/**
 * The loss of model @p m (softmax cross-entropy when it names none); with outputs their first
 * one's.
 */
const struct strata_loss_ops *strata__loss_of(const struct strata_model *m);

/** The model's own loss (m->loss, or softmax cross-entropy when it names none). */
const struct strata_loss_ops *strata__loss_of_model(const struct strata_model *m);

/*
 * Whether a value of @p m's batch that is not finite (an input or a target) always makes a
 * weight gradient that is not finite (decision 0097): the loss's gradient is the error or the
 * given gradient itself (MSE, given_gradient; one output), which the last module's backward
 * multiplies on (a Linear or tanh: a ReLU's would select, turning a NaN into 0) into the last
 * Linear's weight gradient; one input, read by the first module alone, a Linear (an input
 * reaches its weight gradient, even times a zero; no merge or branch reads it past the first).
 */
int strata__loss_values_in_gradients(const struct strata_model *m);

/** Output @p k's loss: its own, or the model's. */
const struct strata_loss_ops *strata__output_loss(const struct strata_model *m, int k);

/**
 * Whether a batch's targets are a row of floats (t, tdim): a float-target loss, or several
 * outputs (a label output's class index is one float of the row); else int32 labels (y).
 */
int strata__float_row(const struct strata_model *m);

/** Whether some output takes float targets (the squared and absolute errors are theirs). */
int strata__float_outputs(const struct strata_model *m);

/** How many of the model's outputs take labels (0 without outputs). */
int strata__label_outputs(const struct strata_model *m);

/**
 * A batch's targets for model @p m, @p outputs values a row: its loss's check, or with
 * outputs (m->noutputs, each @p widths[k] values) a float row of each float output's values
 * (finite, and in [0, 1] for BCE's) and one per label output (a class index: an integer in
 * [0, widths[k])), the message naming output, row and column; one output with labels is the
 * model without outputs (its loss's check).
 */
int strata__targets_check(const struct strata_model *m, const struct strata_batch *b,
                          int outputs, const int *widths);

#endif /* STRATA_NN_LOSS_H */
