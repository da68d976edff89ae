/*
 * The work of one device for each step event, the same code whether the device is the
 * caller's thread (single) or a pinned worker (dp, ddp and the strategies over processes):
 * load its rows, forward with the loss, the optimizer step (one for every strategy but dp's
 * master: unscale and agree, sum of squares, clip, update, gather, the sync variant's members
 * filling in what differs), and the evaluation steps (backward
 * is the replica's own pass, strata__replica_backward(), which the multi-device parent calls
 * with the strategy's hook). What differs between strategies (the step context's
 * collectives, the communicator the devices agree over) is an argument.
 */
#include "strata/status.h"
#include "drivers/comm_blocks.h"
#include "strategy/multi.h"

void strata__dev_load(struct strata_runtime *rt, int dev, const struct strata__step_args *a,
                      int labels)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        strata__replica_load(r, a->batch, v->row0, v->rows, labels);
}

int strata__dev_forward(struct strata_runtime *rt, int dev, const struct strata_step_ctx *c)
{
        struct strata__replica *r = strata__rep(rt, dev);

        STRATA_TRY(strata__replica_forward(r, c));
        strata__replica_loss(r, c, 1);
        return STRATA_OK;
}

/*
 * Whether this step's record of this device's checked collectives covered the whole vector
 * (ddp's buckets, each checked where the transport could), its verdict into *@p nf. A model
 * with no parameters has no bucket and its record is not this step's: not covered.
 */
static int recorded(struct strata_comm *comm, int dev, const struct strata__replica *r, int *nf)
{
        size_t span = 0;

        *nf = comm ? strata__comm_checked(comm, dev, &span) : 0;
        return span && span == strata__replica_view(r)->nparam;
}

/*
 * The split step's check of this device's part [lo, hi): the record of ddp's checked
 * reduce-scatters (decision 0104) where they covered the whole vector this step (every
 * device's stores together, so the agreement's OR is the whole vector's check, as the parts'
 * checks ORed are), else the part read again. A record covers what this device stored (its
 * slice of every bucket), not its part: the choice must be the same on every device, and it is,
 * since every device makes the same calls, their status agreed, under the same conditions.
 */
static int part_nonfinite(struct strata_comm *comm, int dev, const struct strata__replica *r,
                          size_t lo, size_t hi)
{
        int nf;

        return recorded(comm, dev, r, &nf) ? nf : strata__replica_nonfinite_range(r, lo, hi);
}

/*
 * The check of the device's whole reduced gradient where it decides alone: the record of
 * ddp's checked all-reduces where they covered the whole vector this step (decision 0110),
 * else the gradients read again, as recorded() decides for part_nonfinite().
 */
static int alone_nonfinite(struct strata_comm *comm, int dev, const struct strata__replica *r)
{
        int nf;

        return recorded(comm, dev, r, &nf) ? nf : strata__replica_nonfinite(r);
}

/*
 * strata__unscale_step() where this device checks only gradients [lo, hi) when @p part (else
 * all it holds); the agreement over @p comm then decides for every range. With @p alone
 * (strata__dev_alone()) the device's own check is every device's: nothing is exchanged.
 */
static int unscale_range(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                         const struct strata__step_args *a, int *skip, int part, size_t lo,
                         size_t hi, int alone)
{
        struct strata__replica *r = strata__rep(rt, dev);
        int scaled = rt->prec->update != NULL, inf;

        *skip = 0;
        if (!scaled && rt->cfg.train.allow_nonfinite)
                return STRATA_OK; /* the opt-out: the update takes the gradients as they are */
        inf = scaled ? strata__replica_unscale(r, rt->scaler.scale)
              : part ? part_nonfinite(comm, dev, r, lo, hi)
              : alone ? alone_nonfinite(comm, dev, r)
                   : strata__replica_nonfinite(r);
        /* A test's: this device alone saw an overflow (deciding alone, this replica's
         * gradients hold every device's, as dp's master does). */
        for (int d = comm ? dev : 0; d < (comm ? dev + 1 : rt->nreplicas); d++)
                inf |= STRATA__FAULT_NONFINITE(rt->faults, d);
        /* Every device has read the scale before it arrives here; device 0 then changes it. */
        if (comm && !alone)
                STRATA_TRY(strata_comm_reduce_boolean(comm, dev, inf, 0, &inf));
        if (scaled && dev == 0)
                rt->prec->update(&rt->scaler, inf);
        if (inf)
                strata__replica_skip(strata__rep(rt, dev));
        if (inf && !scaled && dev == 0 && a->nonfinite)
                *a->nonfinite = 1; /* an error for the step; the scaler's skip is not */
        *skip = inf;
        return STRATA_OK;
}

int strata__unscale_step(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                         const struct strata__step_args *a, int *skip)
{
        return unscale_range(rt, dev, comm, a, skip, 0, 0, 0, 0);
}

/*
 * Whether the update is split across the devices (decision 0086): the variant leaves each
 * device's part of the reduced gradient in its replica (ddp's buckets and tree in f32: in that
 * replica alone, decision 0096; otherwise the whole of it in every replica), the devices are
 * threads of this process (a pool, no peers) on host memory with the driver's range update,
 * and nothing reads the whole vector before the update (no loss scale, no clipping).
 */
static int split(const struct strata_runtime *rt, const struct strata__multi *m,
                 const struct strata__sync *s)
{
        const struct strata_config_train *t = &rt->cfg.train;

        return s->split && m && m->workers && !m->peers && rt->nreplicas > 1 &&
               !rt->dev->reserve && rt->dev->kernels->update_range && !rt->prec->update &&
               !(t->clip_norm > 0.0f) && !(t->clip_value > 0.0f);
}

int strata__dev_split(const struct strata_runtime *rt, const struct strata__multi *m)
{
        return m && m->sync && split(rt, m, m->sync);
}

/* Floats of a cache line: the parts of the split step start on one. */
#define PART_LINE ((size_t)16)

void strata__dev_part(const struct strata_runtime *rt, size_t n, int dev, size_t *lo, size_t *hi,
                      size_t *block)
{
        size_t devs = (size_t)rt->nreplicas, b = (n + devs - 1) / devs;

        b = b ? (b + PART_LINE - 1) / PART_LINE * PART_LINE : PART_LINE;
        *lo = (size_t)dev * b < n ? (size_t)dev * b : n;
        *hi = n - *lo > b ? *lo + b : n;
        *block = b;
}

/*
 * ddp's buckets sum every element once, in an order that is the same on every device, or
 * pairwise (x + y is y + x), so every replica of every process holds the same reduced bits
 * (what keeps ddp's replicas equal step after step), and each device's check of its own is
 * the agreement's verdict (decision 0091). Not through MPI_Allreduce (process.mpi_allreduce),
 * which promises no rank the same bits as another. In host memory only: a test's overflow
 * enters the gradients from the host (ddp.c).
 */
int strata__dev_alone(const struct strata_runtime *rt, const struct strata__multi *m)
{
        return m && m->sync && m->sync->alone && !rt->prec->update &&
               !rt->cfg.train.allow_nonfinite && !strata__own_memory(rt->dev) &&
               !rt->cfg.process.mpi_allreduce && !split(rt, m, m->sync);
}

/*
 * The split step: this device checks and updates its part (strata__dev_part(): the part the
 * buckets' reduce-scatter summed into this replica alone, decision 0096, still in its cache)
 * and writes the part's new parameters into every other replica (a push, decision 0121: the
 * owner's update then writes no line a peer holds, and the stores into the peers drain behind
 * it), so each replica ends the step with the parameters of the whole update, at half
 * (1/devices) the work. No device writes before every device has passed the agreement (or
 * allow_nonfinite's meeting): a device failing at its optimizer step leaves every replica as it
 * was. The part's optimizer state stays in this replica alone (decision 0100): no step of
 * another device reads it, and strata__dev_opt_whole() copies it over before a read of a whole
 * replica's state. The post's join orders these stores before any device's next read of its
 * replica, and device 0's mark before the coordinator's.
 */
static int split_step(struct strata_runtime *rt, int dev, struct strata_comm *comm,
                      const struct strata__step_args *a)
{
        struct strata__replica *r = strata__rep(rt, dev), *to[STRATA_MAX_DEVICES];
        size_t lo, hi, block;
        int skip, nto = 0;

        strata__dev_part(rt, strata__replica_view(r)->nparam, dev, &lo, &hi, &block);
        STRATA_TRY(unscale_range(rt, dev, comm, a, &skip, 1, lo, hi, 0));
        if (skip)
                return STRATA_OK;
        /* allow_nonfinite checks nothing, so no agreement met the peers after their backward:
         * within the step's one job (decision 0097) a peer may still read its parameters
         * (invariant mode's input gradient after its all-sum), or fail before its update.
         * Meet before writing them. */
        if (rt->cfg.train.allow_nonfinite && !rt->prec->update)
                STRATA_TRY(strata_comm_barrier(comm, dev));
        for (int e = 0; e < rt->nreplicas; e++)
                if (e != dev)
                        to[nto++] = strata__rep(rt, e);
        strata__replica_step_part(r, &rt->cfg.optim, lo, hi, to, nto);
        if (dev == 0)
                rt->opt_parts = 1;
        return STRATA_OK;
}

void strata__dev_opt_whole(const struct strata_runtime *rt)
{
        /* the runtime lives in its arena, never in const storage; the readers that call this
         * take it const because, to their callers, they change nothing */
        struct strata_runtime *w = (struct strata_runtime *)rt;
        size_t n, lo, hi, block;

        if (!rt->opt_parts)
                return;
        n = strata__repv(rt, 0)->nparam;
        for (int d = 0; d < rt->nreplicas; d++) {
                strata__dev_part(rt, n, d, &lo, &hi, &block);
                for (int e = 0; e < rt->nreplicas; e++)
                        if (e != d)
                                strata__replica_state_part(strata__rep(rt, e),
                                                           strata__rep(rt, d), lo, hi);
        }
        w->opt_parts = 0;
}

int strata__dev_step(struct strata_runtime *rt, struct strata__multi *m, int dev,
                     struct strata_comm *comm, const struct strata__step_args *a,
                     const struct strata__sync *s)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata_config_train *t = &rt->cfg.train;
        double ss;
        int skip;

        if (split(rt, m, s))
                return split_step(rt, dev, comm, a);
        STRATA_TRY(unscale_range(rt, dev, comm, a, &skip, 0, 0, 0, strata__dev_alone(rt, m)));
        if (skip)
                return STRATA_OK;
        if (t->clip_norm > 0.0f && s->sumsq) {
                STRATA_TRY(s->sumsq(rt, m, dev, &ss));
                strata__replica_clip_sumsq(r, t->clip_norm, t->clip_value, ss);
        } else {
                strata__replica_clip(r, t->clip_norm, t->clip_value);
        }
        strata__replica_step(r, &rt->cfg.optim);
        return s->gather ? s->gather(rt, m, dev) : STRATA_OK;
}

int strata__dev_eval(struct strata_runtime *rt, int dev, const struct strata__step_args *a,
                     const struct strata_step_ctx *c, int predict)
{
        struct strata__replica *r = strata__rep(rt, dev);
        const struct strata__replica_view *v = strata__replica_view(r);

        strata__dev_load(rt, dev, a, !predict);
        STRATA_TRY(strata__replica_forward(r, c));
        if (predict)
                strata__replica_outputs_to_host(r, a->logits + (size_t)v->row0 * v->out);
        else
                strata__replica_loss(r, c, 0);
        return STRATA_OK;
}
