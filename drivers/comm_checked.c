/*
 * The checked reduce-scatter over blocks (drivers/comm_blocks.h, decision 0104): the shm
 * transport's move sums each rank's slice with strata__comm_reduce_check(), which records in
 * the rank's flags (private to it) whether a sum it stored is NaN or infinite; these entries
 * ask for the check, count the spans checked and hand the record to the split step. The
 * checked all-reduce likewise, which the net transport's direct reduction checks for one local
 * rank, for ddp's step where each device decides alone (decision 0110).
 */
#include "strata/status.h"
#include "drivers/comm_blocks.h"
#include "drivers/comm_internal.h"

/*
 * Collective @p run (@p args) with rank @p rank's move asked to check its sums, @p count
 * elements added to the rank's checked span where it did, its record marked missed where not.
 */
static int checked(struct strata_comm *c, int rank, size_t count,
                   int (*run)(struct strata_comm *c, int rank, const void *args),
                   const void *args)
{
        struct strata__comm_flags *f = &c->flag[rank];
        int rc;

        f->check = 1;
        f->checked = 0;
        rc = run(c, rank, args);
        f->check = 0;
        if (rc == STRATA_OK && f->checked)
                f->span += count;
        else
                f->missed = 1;
        return rc;
}

/* strata__comm_reduce_scatter_checked()'s arguments, for checked(). */
struct rs_args {
        void *g;
        void *recv;
        size_t count, lo, block;
        enum strata_reduce_op o;
};

/* The reduce-scatter over blocks that checked() runs. */
static int run_rs(struct strata_comm *c, int rank, const void *args)
{
        const struct rs_args *a = args;

        return strata__comm_reduce_scatter_blocks(c, rank, a->g, a->recv, a->count, a->lo,
                                                  a->block, STRATA_F32, a->o);
}

int strata__comm_reduce_scatter_checked(struct strata_comm *c, int rank, void *g, void *recv,
                                        size_t count, size_t lo, size_t block,
                                        enum strata_reduce_op o)
{
        struct rs_args a = { g, recv, count, lo, block, o };

        if (!c || rank < 0 || rank >= c->n)
                return run_rs(c, rank, &a); /* its refusal */
        return checked(c, rank, count, run_rs, &a);
}

/* strata__comm_all_reduce_checked()'s arguments, for checked(). */
struct ar_args {
        float *g;
        size_t count;
        enum strata_reduce_op o;
};

/* The all-reduce in place that checked() runs. */
static int run_ar(struct strata_comm *c, int rank, const void *args)
{
        const struct ar_args *a = args;

        return strata_comm_all_reduce(c, rank, a->g, a->g, a->count, STRATA_F32, a->o);
}

int strata__comm_all_reduce_checked(struct strata_comm *c, int rank, float *g, size_t count,
                                    enum strata_reduce_op o)
{
        struct ar_args a = { g, count, o };

        if (!c || rank < 0 || rank >= c->n)
                return run_ar(c, rank, &a); /* its refusal */
        return checked(c, rank, count, run_ar, &a);
}

int strata__comm_checked(struct strata_comm *c, int rank, size_t *span)
{
        struct strata__comm_flags *f;
        int nf;

        *span = 0;
        if (!c || rank < 0 || rank >= c->n)
                return 0;
        f = &c->flag[rank];
        nf = f->nonfinite;
        if (!f->missed)
                *span = f->span;
        f->span = 0;
        f->nonfinite = 0;
        f->missed = 0;
        return nf;
}
