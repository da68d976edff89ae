/* What every strategy's actions use: step contexts, the batch split, metrics. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "strata/status.h"
#include "strategy/internal.h"

struct strata_step_ctx strata__ctx(const struct strata_runtime *rt, int train, int rows_global)
{
        const struct strata_model *m = rt->cfg.model;
        int k = rt->cfg.train.accumulate > 1 ? rt->cfg.train.accumulate : 1;
        int sum = m->reduction == STRATA_REDUCTION_SUM;
        /* mean: the gradient of the batch's mean; sum: of its sum (each over the window) */
        float scale = sum ? 1.0f / (float)k : 1.0f / ((float)rows_global * (float)k);

        if (rt->prec->update) /* loss scaling: the gradients carry the scaler's scale */
                scale *= rt->scaler.scale;
        return (struct strata_step_ctx){ .k = rt->dev->kernels, .seed = rt->cfg.seed,
                                         .step = rt->step, .train = train,
                                         .rows_global = rows_global, .loss_scale = scale,
                                         .world = 1, .reduction = m->reduction,
                                         .loss_beta = m->loss_beta };
}

int strata__prepare(const struct strata_runtime *rt)
{
        if (rt->prec->compute != STRATA_F32)
                STRATA_TRY(rt->dev->kernels->prepare_lp(rt->prec->compute));
        return rt->dev->prepare ? rt->dev->prepare(rt->nreplicas) : STRATA_OK;
}

int strata__accumulate_each(const struct strata_config *c)
{
        return c->train.accumulate > 1 && !c->strategy.invariant &&
               c->train.accumulate_reduce == STRATA_ACCUMULATE_REDUCE_EACH;
}

int strata__invariant_chunks(const struct strata_config *c)
{
        if (!c->strategy.invariant)
                return 0;
        return c->strategy.chunks ? c->strategy.chunks : STRATA__CHUNKS_DEFAULT;
}

void strata__split(struct strata_runtime *rt, const struct strata_batch *b)
{
        int n = rt->world;

        if (strata__invariant_chunks(&rt->cfg)) { /* the same rows, cut into the batch's chunks */
                for (int d = 0; d < rt->nreplicas; d++)
                        strata__replica_chunks(strata__rep(rt, d), b->rows,
                                               strata__invariant_chunks(&rt->cfg), rt->rank0 + d, n);
                return;
        }
        for (int d = 0; d < rt->nreplicas; d++) {
                long g = rt->rank0 + d; /* the global rank: the layout does not change rows */
                int lo = (int)(b->rows * g / n), hi = (int)(b->rows * (g + 1) / n);

                /* Each device loads its own rows when it starts computing on them. */
                strata__replica_set_rows(strata__rep(rt, d), lo, hi - lo);
        }
}

void strata__own_rows(const struct strata_runtime *rt, int rows, int *lo, int *hi)
{
        int g0 = rt->rank0, g1 = rt->rank0 + rt->nreplicas, n = rt->world;

        if (strata__invariant_chunks(&rt->cfg)) {
                strata__chunks_rows(rows, strata__invariant_chunks(&rt->cfg), g0, g1, n, lo, hi);
                return;
        }
        *lo = (int)((long)rows * g0 / n);
        *hi = (int)((long)rows * g1 / n);
}

/* The model's outputs (0: none), each with its own loss among a device's metrics. */
static int outputs_of(const struct strata_config *c)
{
        return c->model->noutputs;
}

/* The model's label outputs, each with its rows predicted right among a device's metrics. */
static int labels_of(const struct strata_config *c)
{
        return strata__label_outputs(c->model);
}

/* Doubles of a device's metrics before the outputs' own losses (not invariant mode). */
static int metrics_base(const struct strata_config *c)
{
        return strata__float_outputs(c->model) ? 5 : 3;
}

int strata__metrics_width(const struct strata_config *c, int world)
{
        struct strata__chunk_plan p;

        if (!strata__invariant_chunks(c))
                return metrics_base(c) + outputs_of(c) + labels_of(c);
        strata__chunks_plan(strata__invariant_chunks(c), world, c->batch, &p);
        /* correct, rows, each label output's correct, then each block's loss, sse, sae and
         * each output's own loss */
        return 2 + labels_of(c) + (3 + outputs_of(c)) * p.blocks;
}

/*
 * *m's mean figures from the sums (loss, squared and absolute errors, the outputs' own) and
 * counts (the model's correct, each label output's in @p lab).
 */
static void metrics_means(const struct strata_runtime *rt, const double *sum, int correct,
                          const int *lab, int rows, struct strata_metrics *m)
{
        const struct strata_model *model = rt->cfg.model;
        int sum_red = model->reduction == STRATA_REDUCTION_SUM, j = 0;
        double elems = (double)rows * (model->noutputs
                                       ? strata__replica_float_width(strata__rep(rt, 0))
                                       : rt->cfg.classes);

        *m = (struct strata_metrics){ .loss = sum_red ? sum[0] : sum[0] / rows,
                                      .correct = correct, .rows = rows,
                                      .noutputs = outputs_of(&rt->cfg) };
        if (strata__float_outputs(model)) {
                m->correct = model->noutputs ? correct : 0;
                m->mse = sum[1] / elems;
                m->mae = sum[2] / elems;
        }
        for (int k = 0; k < m->noutputs; k++) {
                m->losses[k] = sum_red ? sum[3 + k] : sum[3 + k] / rows;
                if (!strata__output_loss(model, k)->float_targets)
                        m->corrects[k] = lab[j++];
        }
}

/* Invariant mode: the sums of @p n devices' blocks, by the chunks' tree. */
static void metrics_tree(const struct strata_runtime *rt, const double *v, int n,
                         struct strata_metrics *m)
{
        int chunks = strata__invariant_chunks(&rt->cfg), w = strata__metrics_width(&rt->cfg, n);
        int nl = labels_of(&rt->cfg), per = 3 + outputs_of(&rt->cfg);
        int blocks = (w - 2 - nl) / per, rows = 0, correct = 0;
        int lab[STRATA_MAX_OUTPUTS] = { 0 };
        double sum[3 + STRATA_MAX_OUTPUTS];

        for (int d = 0; d < n; d++) {
                correct += (int)v[w * d];
                rows += (int)v[w * d + 1];
                for (int k = 0; k < nl; k++)
                        lab[k] += (int)v[w * d + 2 + k];
        }
        for (int j = 0; j < per; j++)
                sum[j] = strata__chunks_total(v, w, 2 + nl, per, j, chunks, n, blocks);
        metrics_means(rt, sum, correct, lab, rows, m);
}

void strata__metrics_sum(const struct strata_runtime *rt, const double *v, int n,
                         struct strata_metrics *m)
{
        int w = strata__metrics_width(&rt->cfg, n), base = metrics_base(&rt->cfg), rows = 0;
        int nl = labels_of(&rt->cfg), correct = 0;
        int lab[STRATA_MAX_OUTPUTS] = { 0 };
        double sum[3 + STRATA_MAX_OUTPUTS] = { 0.0 };

        if (!m)
                return;
        if (strata__invariant_chunks(&rt->cfg)) {
                metrics_tree(rt, v, n, m);
                return;
        }
        for (int d = 0; d < n; d++) { /* in device order */
                sum[0] += v[w * d];
                correct += (int)v[w * d + 1];
                rows += (int)v[w * d + 2];
                for (int j = 3; j < w - nl; j++) /* the errors (base 5), the outputs' own */
                        sum[j - 3 + (base == 5 ? 1 : 3)] += v[w * d + j];
                for (int k = 0; k < nl; k++)
                        lab[k] += (int)v[w * d + w - nl + k];
        }
        metrics_means(rt, sum, correct, lab, rows, m);
}

void strata__metrics_local(const struct strata_runtime *rt, double *v)
{
        int w = strata__metrics_width(&rt->cfg, rt->world), nout = outputs_of(&rt->cfg);
        int nl = labels_of(&rt->cfg);

        for (int d = 0; d < rt->nreplicas; d++) {
                const struct strata__replica *r = strata__rep(rt, d);
                struct strata__replica_metrics rm;
                double *o = v + (size_t)w * d;
                double *lab = strata__invariant_chunks(&rt->cfg) ? o + 2 : o + w - nl;

                strata__replica_metrics(r, &rm);
                for (int k = 0, j = 0; k < nout; k++)
                        if (rm.label[k])
                                lab[j++] = rm.out_correct[k];
                if (strata__invariant_chunks(&rt->cfg)) {
                        o[0] = rm.correct;
                        o[1] = rm.rows;
                        for (int b = 0; b < (w - 2 - nl) / (3 + nout); b++)
                                for (int j = 0; j < 3 + nout; j++)
                                        o[2 + nl + (3 + nout) * b + j] =
                                                strata__chunks_block_loss(
                                                        strata__replica_chunkset(r), b, j);
                        continue;
                }
                o[0] = rm.loss_sum;
                o[1] = rm.correct;
                o[2] = rm.rows;
                if (metrics_base(&rt->cfg) == 5) {
                        o[3] = rm.sse;
                        o[4] = rm.sae;
                }
                for (int k = 0; k < nout; k++)
                        o[metrics_base(&rt->cfg) + k] = rm.out_loss[k];
        }
}

int strata__metrics_loss_finite(const struct strata_runtime *rt)
{
        int w = strata__metrics_width(&rt->cfg, rt->world);
        double v[STRATA__METRICS_ALL];

        strata__metrics_local(rt, v);
        for (int d = 0; d < rt->nreplicas; d++)
                if (!isfinite(v[(size_t)w * d])) /* the device's sum of its rows' losses */
                        return 0;
        return 1;
}

void strata__metrics(const struct strata_runtime *rt, struct strata_metrics *m)
{
        double v[STRATA__METRICS_ALL];

        strata__metrics_local(rt, v);
        strata__metrics_sum(rt, v, rt->nreplicas, m);
}

int strata__local_collective(struct strata_runtime *rt, const struct strata_coll *op,
                             void *const *bufs, const void *const *send)
{
        size_t es = strata_dtype_size(op->dtype);

        (void)rt;
        if (op->kind == STRATA_COLL_BARRIER)
                return STRATA_OK;
        if (!es || (unsigned)op->op >= STRATA_OP_COUNT)
                return strata__fail(STRATA_EINVAL, "collective: bad dtype or op");
        if (op->count && !bufs[0])
                return strata__fail(STRATA_EINVAL, "collective: buffer 0 is NULL");
        if (op->count > SIZE_MAX / es)
                return strata__fail(STRATA_EOVERFLOW, "collective: %zu elements of %zu bytes "
                                                      "overflow", op->count, es);
        if (op->kind == STRATA_COLL_ALL_GATHER && op->count)
                memmove(bufs[0], send[0], op->count * es);
        return STRATA_OK; /* one device: the reduction of one value is itself */
}

double strata__stall_s(const struct strata_config *c)
{
        return c->trace.stall_s == 0.0 ? 60.0 : c->trace.stall_s < 0.0 ? 0.0 : c->trace.stall_s;
}
