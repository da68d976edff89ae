/*
 * How a collective's data moves: on host memory with the SIMD reduce/copy kernels, or on
 * device memory through the device driver's reduce_many/copy_many. Shared by the protocol's
 * eager path and the transports.
 */
#include "arch/reduce.h"
#include "drivers/comm_internal.h"
#include "strata/device.h"

int strata__comm_world_op(int op, enum strata_dtype dt, int world)
{
        if (world < STRATA__HALVING_FROM || (dt != STRATA_F32 && dt != STRATA_F64))
                return op;
        if (op == STRATA_OP_SUM)
                return STRATA__SUM_HALVING;
        if (op == STRATA_OP_MEAN)
                return STRATA__MEAN_HALVING;
        return op;
}

void strata__comm_reduce(const struct strata_comm *c, const struct strata_coll *op,
                         void *const *dst, int ndst, const void *const *src, int nsrc, size_t lo,
                         size_t hi, int nt)
{
        if (c->dev)
                c->dev->reduce_many((float *const *)dst, ndst, (const float *const *)src, nsrc,
                                    lo, hi, op->op == STRATA_OP_MEAN);
        else
                strata__reduce_many(op->dtype, strata__comm_world_op(op->op, op->dtype, c->world),
                                    dst, ndst, src, nsrc, lo, hi, nt);
}

void strata__comm_reduce_check(struct strata_comm *c, int rank, const struct strata_coll *op,
                               void *dst, const void *const *src, int nsrc, size_t lo, size_t hi,
                               int nt)
{
        struct strata__comm_flags *f = &c->flag[rank];
        void *d[1] = { dst };
        int nf = -1;

        if (c->dev)
                strata__comm_reduce(c, op, d, 1, src, nsrc, lo, hi, nt);
        else
                nf = strata__reduce_many_check(op->dtype,
                                               strata__comm_world_op(op->op, op->dtype, c->world),
                                               dst, src, nsrc, lo, hi, nt);
        if (nf < 0)
                f->missed = 1;
        else
                f->nonfinite |= (unsigned char)nf;
}

void strata__comm_copy(const struct strata_comm *c, void *const *dst, int ndst, const void *src,
                       size_t lo, size_t hi, int nt)
{
        if (c->dev)
                c->dev->copy_many(dst, ndst, src, lo, hi);
        else
                strata__copy_many(dst, ndst, src, lo, hi, nt);
}
