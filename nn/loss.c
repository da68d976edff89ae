/*
 * Losses: each a `static const` table (struct strata_loss_ops) over the driver's kernels.
 * The runtime calls the model's loss after its last module and validates targets with it
 * before a step. Label losses read int32 labels (an output of several takes its label as one
 * float of the targets row, checked here and converted as the replica loads it); float-target
 * losses (MSE, L1, smooth L1, BCE with logits) read the batch's f32 targets staged per device
 * and run the driver's pointwise_loss kernel: each row's sum over its outputs, rows summed in
 * row order.
 */
#include <math.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "data/gather.h"
#include "nn/loss.h"

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
        if (m->noutputs > 0 && m->outputs[0].loss)
                return m->outputs[0].loss;
        return strata__loss_of_model(m);
}

/* Every value of rows [0, rows) of a batch's @p what (x or t) is finite (and in [0, 1]). */
static int check_values(const struct strata_batch *b, const char *what, const void *base,
                        enum strata_dtype type, int width, int unit)
{
        for (int i = 0; i < b->rows; i++) {
                size_t row = strata__batch_row(b, i);

                for (int j = 0; j < width; j++) {
                        double v = strata__value(base, type, row * (size_t)width + (size_t)j);

                        if (!isfinite(v) || (unit && !(v >= 0.0 && v <= 1.0)))
                                return strata__fail(STRATA_EINVAL, "%s of row %d, column %d "
                                                    "is %g%s", what, i, j, v,
                                                    unit ? " (not in [0, 1])" : "");
                }
        }
        return STRATA_OK;
}

/* The batch's form for a row of float targets of @p tdim values: present, f32 or f64. */
static int row_form(const struct strata_batch *b, int tdim)
{
        if (!b->t)
                return strata__fail(STRATA_EINVAL, "the loss takes float targets (t, tdim); "
                                                   "the batch has none");
        if (b->ttype != STRATA_F32 && b->ttype != STRATA_F64)
                return strata__fail(STRATA_EINVAL, "targets of type %d: STRATA_F32 or "
                                                   "STRATA_F64", (int)b->ttype);
        if (b->tdim < 1)
                return strata__fail(STRATA_EINVAL, "tdim %d: set it to the targets' values a "
                                                   "row, the model's %d outputs", b->tdim,
                                    tdim);
        if (b->tdim != tdim)
                return strata__fail(STRATA_EINVAL, "targets are %d values a row (tdim); the "
                                                   "model has %d outputs", b->tdim, tdim);
        return STRATA_OK;
}

/*
 * A float-target batch: targets present, f32 or f64, one per output, finite (in [0, 1] for
 * BCE), and float inputs finite.
 */
static int targets_check(const struct strata_batch *b, int outputs, int unit)
{
        STRATA_TRY(row_form(b, outputs));
        STRATA_TRY(check_values(b, "target", b->t, b->ttype, b->tdim, unit));
        return b->x ? check_values(b, "input", b->x, b->xtype, b->dim, 0) : STRATA_OK;
}

static int real_check(const struct strata_batch *b, int outputs)
{
        return targets_check(b, outputs, 0);
}

static int unit_check(const struct strata_batch *b, int outputs)
{
        return targets_check(b, outputs, 1);
}

/*
 * Loss @p kind through the driver's kernel: under mean reduction each row's value and
 * gradient are divided by the outputs (the runtime divides by the rows), PyTorch's mean over
 * every element.
 */
static double pointwise(enum strata_pointwise_loss kind, const struct strata_step_ctx *c,
                        const float *out, const void *t, int rows, int outputs, float *dout)
{
        int mean = c->reduction == STRATA_REDUCTION_MEAN;
        float scale = mean ? c->loss_scale / (float)outputs : c->loss_scale;
        float beta = c->loss_beta > 0.0f ? c->loss_beta : 1.0f;
        double s = c->k->pointwise_loss(kind, beta, out, t, rows, outputs, scale, dout);

        return mean ? s / outputs : s;
}

/*
 * A pointwise loss on float targets: its forward is the one kernel, which reads the loss by
 * its kind; @p check is what its targets must be (real, or in [0, 1]).
 */
#define POINTWISE_LOSS(var, lname, kind, chk)                                                 \
        static double var##_forward(const struct strata_step_ctx *c, const float *out,         \
                                    const void *t, int rows, int outputs, float *dout,         \
                                    int *correct)                                              \
        {                                                                                      \
                (void)correct;                                                                 \
                return pointwise(kind, c, out, t, rows, outputs, dout);                        \
        }                                                                                      \
        const struct strata_loss_ops var = { .name = lname, .check = chk,                      \
                                             .forward = var##_forward, .float_targets = 1 };
POINTWISE_LOSS(strata_mse, "mse", STRATA_PLOSS_MSE, real_check)
POINTWISE_LOSS(strata_l1, "l1", STRATA_PLOSS_L1, real_check)
POINTWISE_LOSS(strata_huber, "huber", STRATA_PLOSS_HUBER, real_check)
POINTWISE_LOSS(strata_bce_with_logits, "bce_with_logits", STRATA_PLOSS_BCE_LOGITS, unit_check)
#undef POINTWISE_LOSS

/*
 * The float targets are the output's gradient, given by the caller (an actor's dQ/da from its
 * critic's input gradient): the value is sum(t * out), the gradient t (times loss_scale).
 */
static int given_gradient_check(const struct strata_batch *b, int outputs)
{
        (void)b, (void)outputs;
        return STRATA_OK;
}

static double given_gradient_forward(const struct strata_step_ctx *c, const float *out,
                                     const void *targets, int rows, int outputs, float *dout,
                                     int *correct)
{
        const float *t = targets;
        double sum = 0.0;

        for (int i = 0; i < rows * outputs; i++) {
                sum += (double)t[i] * out[i];
                if (dout)
                        dout[i] = t[i] * c->loss_scale;
        }
        if (correct)
                *correct = 0;
        return sum;
}

const struct strata_loss_ops strata_given_gradient = { "given_gradient", given_gradient_check,
                                                       given_gradient_forward, 1 };

const struct strata_loss_ops *strata__output_loss(const struct strata_model *m, int k)
{
        return m->outputs[k].loss ? m->outputs[k].loss : strata__loss_of_model(m);
}

const struct strata_loss_ops *strata__loss_of_model(const struct strata_model *m)
{
        return m->loss ? m->loss : &strata_softmax_cross_entropy;
}

int strata__float_row(const struct strata_model *m)
{
        return m->noutputs > 1 || strata__loss_of(m)->float_targets;
}

int strata__float_outputs(const struct strata_model *m)
{
        if (m->noutputs <= 0)
                return strata__loss_of(m)->float_targets;
        for (int k = 0; k < m->noutputs; k++)
                if (strata__output_loss(m, k)->float_targets)
                        return 1;
        return 0;
}

int strata__label_outputs(const struct strata_model *m)
{
        int n = 0;

        for (int k = 0; k < m->noutputs; k++)
                n += !strata__output_loss(m, k)->float_targets;
        return n;
}

/*
 * Output @p k's targets, columns [lo, lo + n) of @p b's rows: a label output's one column a
 * class index (an integer in [0, @p classes)); a float output's finite values, in [0, 1] for
 * BCE's. The message names the output, the row and the column.
 */
static int output_columns(const struct strata_batch *b, const struct strata_loss_ops *loss,
                          int k, int lo, int n, int classes)
{
        for (int i = 0; i < b->rows; i++) {
                size_t row = strata__batch_row(b, i);

                for (int j = lo; j < lo + n; j++) {
                        double v = strata__value(b->t, b->ttype, row * (size_t)b->tdim + j);

                        if (!loss->float_targets && !(v >= 0.0 && v < classes && v == floor(v)))
                                return strata__fail(STRATA_EINVAL, "label of output %d, row "
                                                    "(sample) %d, column %d is %g: not a "
                                                    "class index (an integer in [0, %d))", k,
                                                    i, j, v, classes);
                        if (loss->float_targets && !isfinite(v))
                                return strata__fail(STRATA_EINVAL, "target of row %d, column "
                                                    "%d (output %d) is %g", i, j, k, v);
                        if (loss == &strata_bce_with_logits && !(v >= 0.0 && v <= 1.0))
                                return strata__fail(STRATA_EINVAL, "target of row %d, column "
                                                    "%d (output %d) is %g (not in [0, 1])",
                                                    i, j, k, v);
                }
        }
        return STRATA_OK;
}

int strata__targets_check(const struct strata_model *m, const struct strata_batch *b,
                          int outputs, const int *widths)
{
        int lo = 0, tdim = 0;

        if (m->noutputs <= 0 || !strata__float_row(m)) /* one output with labels: as none */
                return strata__loss_of(m)->check(b, outputs);
        for (int k = 0; k < m->noutputs; k++)
                tdim += strata__output_loss(m, k)->float_targets ? widths[k] : 1;
        if (b->t && b->tdim != tdim && strata__label_outputs(m))
                return strata__fail(STRATA_EINVAL, "targets are %d values a row (tdim); the "
                                    "model's outputs take %d (one class index per label "
                                    "output)", b->tdim, tdim);
        STRATA_TRY(row_form(b, tdim));
        for (int k = 0; k < m->noutputs; k++) {
                const struct strata_loss_ops *loss = strata__output_loss(m, k);
                int n = loss->float_targets ? widths[k] : 1;

                STRATA_TRY(output_columns(b, loss, k, lo, n, widths[k]));
                lo += n;
        }
        return b->x ? check_values(b, "input", b->x, b->xtype, b->dim, 0) : STRATA_OK;
}

int strata__loss_values_in_gradients(const struct strata_model *m)
{
        const struct strata_loss_ops *loss = strata__loss_of(m);
        const struct strata_module_ops *end;

        if (m->noutputs > 0 || m->ninputs > 1 || m->nmodules <= 0 ||
            m->modules[0].ops != &strata_linear)
                return 0;
        for (int i = 1; i < m->nmodules; i++)
                if (m->modules[i].from < 0) /* the model's input, read past module 0 */
                        return 0;
        end = m->modules[m->nmodules - 1].ops;
        return (end == &strata_linear || end == &strata_tanh) &&
               (loss == &strata_mse || loss == &strata_given_gradient);
}
