/*
 * The checked reduce-scatter over blocks (drivers/comm_blocks.h, decision 0104): the shm
 * transport's move sums each rank's slice with strata__comm_reduce_check(), which records in
 * the rank's flags (private to it) whether a sum it stored is NaN or infinite; these entries
 * ask for the check, count the spans checked and hand the record to the split step.
 */
#include "strata/status.h"
#include "drivers/comm_blocks.h"
#include "drivers/comm_internal.h"

int strata__comm_reduce_scatter_checked(struct strata_comm *c, int rank, void *g, void *recv,
                                        size_t count, size_t lo, size_t block,
                                        enum strata_reduce_op o)
{
        struct strata__comm_flags *f;
        int rc;

        if (!c || rank < 0 || rank >= c->n)
                return strata__comm_reduce_scatter_blocks(c, rank, g, recv, count, lo, block,
                                                          STRATA_F32, o); /* its refusal */
        f = &c->flag[rank];
        f->check = 1;
        f->checked = 0;
        rc = strata__comm_reduce_scatter_blocks(c, rank, g, recv, count, lo, block, STRATA_F32,
                                                o);
        f->check = 0;
        if (rc == STRATA_OK && f->checked)
                f->span += count;
        else
                f->missed = 1;
        return rc;
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
