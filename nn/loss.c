/*
 * Losses: each a `static const` table (struct strata_loss_ops) over the driver's kernels.
 * The runtime calls the model's loss after its last module and validates targets with it
 * before a step.
 */
#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/replica.h"

static int xent_check(const struct strata_batch *b, int outputs)
{
        for (int i = 0; i < b->rows; i++)
                if (b->y[i] < 0 || b->y[i] >= outputs)
                        return strata__fail(STRATA_EINVAL, "label %d of row %d not in [0, %d)",
                                            b->y[i], i, outputs);
        return STRATA_OK;
}

static double xent_forward(const struct strata_step_ctx *c, const float *out,
                           const void *targets, int rows, int outputs, float *dout,
                           int *correct)
{
        return c->k->softmax_xent(out, targets, rows, outputs, c->loss_scale, dout, correct);
}

const struct strata_loss_ops strata_softmax_cross_entropy = {
        .name = "softmax_cross_entropy",
        .check = xent_check,
        .forward = xent_forward,
};

const struct strata_loss_ops *strata__loss_of(const struct strata_model *m)
{
        return m->loss ? m->loss : &strata_softmax_cross_entropy;
}
