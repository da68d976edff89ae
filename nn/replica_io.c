/*
 * A replica's batch I/O and losses: a batch's rows made its input and targets (the data
 * layer's gathers, data/gather.c, then the device's view), several inputs and outputs split
 * from a row, the model's outputs back to the host, and the loss of every output with its
 * gradient (invariant mode: over the chunks, nn/chunks.c).
 */
#include "strata/status.h"
#include "kernel/trace.h"
#include "data/gather.h"
#include "nn/replica_private.h"

/* What batch I/O and the loss show on the device's trace track. */
static const struct strata__span span_load = { "load batch", "data", "rows", 0 };
static const struct strata__span span_loss = { "loss", "compute", "rows", 0 };

/*
 * Split @p n parts of @p rows rows of @p width values at @p src into their buffers @p dst,
 * part k the @p w[k] values at @p off[k] of each row (the driver's copy, row by row).
 */
static void split_rows(const struct strata__replica *r, const float *src, int rows, int width,
                       int n, const int *off, const int *w, float *const *dst)
{
        for (int k = 0; k < n; k++)
                for (int i = 0; i < rows; i++)
                        r->v.k->copy(dst[k] + (size_t)i * w[k],
                                   src + (size_t)i * width + off[k], (size_t)w[k]);
}

/*
 * batch_to_device (see strata__replica_load): the data layer gives the rows where they lie or
 * gathers them into the host staging; the device's view of them is the rows themselves where
 * it reads host memory, else a copy into its staging.
 */
static void load(struct strata__replica *r, const struct strata_batch *b, int lo, int rows,
                 int with_labels)
{
        struct strata__replica_io *io = &r->io;
        const float *t = NULL;

        r->v.rows = rows;
        r->v.row0 = lo;
        r->x = r->drv->device_view(r->x_stage, strata__batch_inputs(b, lo, rows, r->x_host),
                                   sizeof(float) * (size_t)rows * b->dim);
        if (io->nin > 1)
                split_rows(r, r->x, rows, b->dim, io->nin, io->in_off, io->in_w, io->xin);
        r->targets = NULL;
        if (with_labels && r->float_row && b->t) {
                t = strata__batch_targets(b, lo, rows, r->y_host);
                r->targets = r->drv->device_view(r->y_stage, t,
                                                 sizeof(float) * (size_t)rows * b->tdim);
        } else if (with_labels && b->y) {
                r->targets = r->drv->device_view(r->y_stage, b->y + lo,
                                                 sizeof(int32_t) * (size_t)rows);
        }
        io->t[0] = r->targets;
        for (int k = 0; io->nout > 1 && k < io->nout; k++) {
                io->t[k] = NULL;
                if (!r->targets)
                        continue;
                if (!io->label[k]) { /* its columns of the rows */
                        split_rows(r, r->targets, rows, io->tdim, 1, &io->toff[k], &io->tw[k],
                                   &io->tout[k]);
                        io->t[k] = io->tout[k];
                        continue;
                }
                for (int i = 0; i < rows; i++) /* its class index, checked an integer */
                        io->lab_host[k][i] = (int32_t)t[(size_t)i * io->tdim + io->toff[k]];
                io->t[k] = r->drv->device_view(io->tout[k], io->lab_host[k],
                                               sizeof(int32_t) * (size_t)rows);
        }
}

void strata__replica_load(struct strata__replica *r, const struct strata_batch *b, int lo,
                          int rows, int with_labels)
{
        uint64_t t0 = strata__track_begin(r->v.track, &span_load, NULL);

        load(r, b, lo, rows, with_labels);
        strata__track_end(r->v.track, t0, rows);
}

void strata__replica_chunks(struct strata__replica *r, int rows, int chunks, int g, int world)
{
        strata__chunks_set(r->v.chunks, rows, chunks, g, world, &r->v.row0, &r->v.rows);
}

void strata__replica_outputs_to_host(const struct strata__replica *r, float *dst)
{
        const struct strata__replica_io *io = &r->io;

        if (io->nout <= 1) { /* the last module's output */
                r->drv->to_host(dst, r->y[r->v.nlayers - 1],
                                sizeof(float) * (size_t)r->v.rows * (size_t)r->v.out);
                return;
        }
        for (int i = 0; i < r->v.rows; i++)
                for (int k = 0; k < io->nout; k++)
                        r->drv->to_host(dst + (size_t)i * r->v.out + io->ooff[k],
                                        r->y[io->mod[k]] + (size_t)i * io->w[k],
                                        sizeof(float) * (size_t)io->w[k]);
}

/* Invariant mode: the loss over the chunks, the device's sums its blocks' in order. */
static void loss_chunks(struct strata__replica *r, const struct strata_step_ctx *c,
                        const float *out, int grad)
{
        struct strata__chunks_loss cl = { .loss = r->loss, .out = out, .targets = r->targets,
                                          .width = r->v.out, .dout = grad ? r->dbuf[0] : NULL };

        strata__chunks_loss(r->v.chunks, c, &cl, 1);
        r->loss_sum = cl.sum;
        r->correct = cl.correct;
        r->sse = cl.sse;
        r->sae = cl.sae;
}

/*
 * The outputs' rows predicted right: each label output's (from @p cl), the first one's as the
 * model's.
 */
static void outputs_correct(struct strata__replica *r, const struct strata__chunks_loss *cl)
{
        const struct strata__replica_io *io = &r->io;

        r->correct = 0;
        for (int k = io->nout - 1; k >= 0; k--) {
                r->out_correct[k] = io->label[k] ? cl[k].correct : 0;
                if (io->label[k])
                        r->correct = cl[k].correct;
        }
}

/*
 * Several outputs: each output's loss with its weight, in the list's order: its gradient
 * scaled by the weight (the loss scale times it) into its buffer, each output's own loss and
 * (label outputs) rows predicted right, the weighted sum of the losses and the plain sums of
 * the errors over every float output. Invariant mode: per chunk, each block the outputs'
 * weighted sum in the same order, so the tree is as a single output's.
 */
static void loss_outputs(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata__replica_io *io = &r->io;
        struct strata__chunks_loss cl[STRATA_MAX_OUTPUTS];
        struct strata_step_ctx cc = *c;

        r->loss_sum = r->sse = r->sae = 0.0;
        for (int k = 0; k < io->nout; k++)
                cl[k] = (struct strata__chunks_loss){
                        .loss = io->loss[k], .out = r->y[io->mod[k]], .targets = io->t[k],
                        .width = io->w[k], .weight = io->weight[k],
                        .dout = !grad ? NULL : io->gout[k] ? io->gout[k] : r->dbuf[0] };
        if (r->v.chunks) {
                strata__chunks_loss(r->v.chunks, c, cl, io->nout);
                r->loss_sum = cl[0].sum;
                r->sse = cl[0].sse;
                r->sae = cl[0].sae;
                for (int k = 0; k < io->nout; k++)
                        r->out_loss[k] = cl[k].own;
                outputs_correct(r, cl);
                return;
        }
        for (int k = 0; k < io->nout; k++) {
                const float *out = cl[k].out;
                float *dout = cl[k].dout;

                cc.loss_scale = c->loss_scale * io->weight[k];
                r->out_loss[k] = io->loss[k]->forward(&cc, out, io->t[k], r->v.rows, io->w[k],
                                                      dout, io->label[k] ? &cl[k].correct
                                                                         : NULL);
                r->loss_sum += (double)io->weight[k] * r->out_loss[k];
                if (io->label[k])
                        continue;
                r->sse += r->v.k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, io->t[k], r->v.rows,
                                               io->w[k], 0.0f, NULL);
                r->sae += r->v.k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, io->t[k], r->v.rows,
                                               io->w[k], 0.0f, NULL);
        }
        outputs_correct(r, cl);
}

void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad)
{
        const struct strata_layer *last = &r->v.layers[r->v.nlayers - 1];
        uint64_t t0 = strata__track_begin(r->v.track, &span_loss, NULL);

        const float *out = r->y[r->v.nlayers - 1];

        if (r->io.nout) {
                loss_outputs(r, c, grad);
                strata__track_end(r->v.track, t0, r->v.rows);
                return;
        }
        if (r->v.chunks) {
                loss_chunks(r, c, out, grad);
                strata__track_end(r->v.track, t0, r->v.rows);
                return;
        }
        r->loss_sum = r->loss->forward(c, out, r->targets, r->v.rows, last->out,
                                       grad ? r->dbuf[0] : NULL, &r->correct);
        if (r->loss->float_targets) {
                r->correct = 0;
                r->sse = r->v.k->pointwise_loss(STRATA_PLOSS_MSE, 1.0f, out, r->targets, r->v.rows,
                                              last->out, 0.0f, NULL);
                r->sae = r->v.k->pointwise_loss(STRATA_PLOSS_L1, 1.0f, out, r->targets, r->v.rows,
                                              last->out, 0.0f, NULL);
        }
        strata__track_end(r->v.track, t0, r->v.rows);
}

void strata__replica_metrics(const struct strata__replica *r, struct strata__replica_metrics *m)
{
        *m = (struct strata__replica_metrics){ .loss_sum = r->loss_sum, .sse = r->sse,
                                               .sae = r->sae, .correct = r->correct,
                                               .rows = r->v.rows };
        for (int k = 0; k < r->io.nout; k++) {
                m->out_loss[k] = r->out_loss[k];
                m->out_correct[k] = r->out_correct[k];
                m->label[k] = r->io.label[k];
        }
}

const int *strata__replica_output_widths(const struct strata__replica *r)
{
        return r->io.w;
}

int strata__replica_float_width(const struct strata__replica *r)
{
        return r->io.fwidth;
}

void strata__replica_set_rows(struct strata__replica *r, int row0, int rows)
{
        r->v.row0 = row0;
        r->v.rows = rows;
}
