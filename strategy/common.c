/* What every strategy's actions use: step contexts, the batch split, metrics. */
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

int strata__chunks(const struct strata_config *c)
{
        if (!c->strategy.invariant)
                return 0;
        return c->strategy.chunks ? c->strategy.chunks : STRATA__CHUNKS_DEFAULT;
}

void strata__split(struct strata_runtime *rt, const struct strata_batch *b)
{
        int n = rt->world;

        if (strata__chunks(&rt->cfg)) { /* the same rows, cut into the batch's chunks */
                for (int d = 0; d < rt->nreplicas; d++)
                        strata__replica_chunks(&rt->replicas[d], b->rows,
                                               strata__chunks(&rt->cfg), rt->rank0 + d, n);
                return;
        }
        for (int d = 0; d < rt->nreplicas; d++) {
                struct strata__replica *r = &rt->replicas[d];
                long g = rt->rank0 + d; /* the global rank: the layout does not change rows */
                int lo = (int)(b->rows * g / n), hi = (int)(b->rows * (g + 1) / n);

                /* Each device loads its own rows when it starts computing on them. */
                r->rows = hi - lo;
                r->row0 = lo;
        }
}

void strata__own_rows(const struct strata_runtime *rt, int rows, int *lo, int *hi)
{
        int g0 = rt->rank0, g1 = rt->rank0 + rt->nreplicas, n = rt->world;

        if (strata__chunks(&rt->cfg)) {
                strata__chunks_rows(rows, strata__chunks(&rt->cfg), g0, g1, n, lo, hi);
                return;
        }
        *lo = (int)((long)rows * g0 / n);
        *hi = (int)((long)rows * g1 / n);
}

int strata__metrics_width(const struct strata_config *c, int world)
{
        struct strata__chunk_plan p;

        if (!strata__chunks(c))
                return strata__loss_of(c->model)->float_targets ? 5 : 3;
        strata__chunks_plan(strata__chunks(c), world, c->batch, &p);
        return 2 + 3 * p.blocks; /* correct, rows, then each block's loss, sse, sae */
}

/* Invariant mode: the sums of @p n devices' blocks, by the chunks' tree. */
static void metrics_tree(const struct strata_runtime *rt, const double *v, int n,
                         struct strata_metrics *m)
{
        int chunks = strata__chunks(&rt->cfg), w = strata__metrics_width(&rt->cfg, n);
        int blocks = (w - 2) / 3, rows = 0, correct = 0;
        double elems, sum[3];

        for (int d = 0; d < n; d++) {
                correct += (int)v[w * d];
                rows += (int)v[w * d + 1];
        }
        for (int j = 0; j < 3; j++)
                sum[j] = strata__chunks_total(v, w, 2, 3, j, chunks, n, blocks);
        elems = (double)rows * rt->cfg.classes;
        *m = (struct strata_metrics){ .loss = sum[0] / rows, .correct = correct, .rows = rows };
        if (strata__loss_of(rt->cfg.model)->float_targets) {
                m->correct = 0;
                m->mse = sum[1] / elems;
                m->mae = sum[2] / elems;
        }
        if (rt->cfg.model->reduction == STRATA_REDUCTION_SUM)
                m->loss = sum[0];
}

void strata__metrics_sum(const struct strata_runtime *rt, const double *v, int n,
                         struct strata_metrics *m)
{
        int w = strata__metrics_width(&rt->cfg, n), rows = 0, correct = 0;
        double loss = 0.0, sse = 0.0, sae = 0.0, elems;

        if (!m)
                return;
        if (strata__chunks(&rt->cfg)) {
                metrics_tree(rt, v, n, m);
                return;
        }
        for (int d = 0; d < n; d++) {
                loss += v[w * d];
                correct += (int)v[w * d + 1];
                rows += (int)v[w * d + 2];
                if (w == 5) {
                        sse += v[w * d + 3];
                        sae += v[w * d + 4];
                }
        }
        elems = (double)rows * rt->cfg.classes;
        *m = (struct strata_metrics){ .loss = loss / rows, .correct = correct, .rows = rows,
                                      .mse = w == 5 ? sse / elems : 0.0,
                                      .mae = w == 5 ? sae / elems : 0.0 };
        if (rt->cfg.model->reduction == STRATA_REDUCTION_SUM)
                m->loss = loss;
}

void strata__metrics_local(const struct strata_runtime *rt, double *v)
{
        int w = strata__metrics_width(&rt->cfg, rt->world);

        for (int d = 0; d < rt->nreplicas; d++) {
                const struct strata__replica *r = &rt->replicas[d];
                double *o = v + (size_t)w * d;

                if (strata__chunks(&rt->cfg)) {
                        o[0] = r->correct;
                        o[1] = r->rows;
                        for (int b = 0; b < (w - 2) / 3; b++)
                                for (int j = 0; j < 3; j++)
                                        o[2 + 3 * b + j] =
                                                strata__chunks_block_loss(r->chunks, b, j);
                        continue;
                }
                o[0] = r->loss_sum;
                o[1] = r->correct;
                o[2] = r->rows;
                if (w == 5) {
                        o[3] = r->sse;
                        o[4] = r->sae;
                }
        }
}

void strata__metrics(const struct strata_runtime *rt, struct strata_metrics *m)
{
        double v[STRATA__METRICS_MAX * STRATA_MAX_DEVICES];

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
