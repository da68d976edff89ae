/*
 * The `shm` transport: ranks share one address space, so every rank reads its peers'
 * buffers directly (no staging copy). Reductions are split into one slice per rank, each slice
 * reduced from all ranks in rank order and written straight into every rank's receive buffer.
 * Slices start on cache-line boundaries; large messages use streaming stores.
 */
#include <string.h>

#include "strata/status.h"
#include "drivers/comm_internal.h"

#define NT_BYTES ((size_t)32 << 20) /* streaming stores from this size on (past the caches) */

/* Every rank must be in this process: peers' buffers are read and written directly. */
static int shm_probe(const struct strata_comm_config *cfg, const char **why)
{
        if (cfg->local_size == cfg->world_size)
                return 1;
        if (why)
                *why = "shm joins ranks of one process only";
        return 0;
}

static void slice(size_t count, size_t es, int n, int rank, size_t *lo, size_t *hi)
{
        size_t line = 64 / es ? 64 / es : 1;
        size_t a = count * (size_t)rank / (size_t)n, b = count * (size_t)(rank + 1) / (size_t)n;

        a = (a + line - 1) / line * line;
        b = rank == n - 1 ? count : (b + line - 1) / line * line;
        *lo = a < count ? a : count;
        *hi = b < count ? b : count;
}

static int broadcast(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype), lo, hi;
        void *dst[STRATA_MAX_DEVICES];
        int nd = 0;

        for (int r = 0; r < c->n; r++)
                if (r != op->root)
                        dst[nd++] = strata__comm_peer(c, rank, r)->recv;
        slice(op->count, es, c->n, rank, &lo, &hi);
        strata__comm_copy(c, dst, nd, strata__comm_peer(c, rank, op->root)->recv, lo * es,
                          hi * es, op->count * es >= NT_BYTES);
        return STRATA_OK;
}

static int reduce_to(struct strata_comm *c, int rank, const struct strata_coll *op, int all)
{
        size_t es = strata_dtype_size(op->dtype), lo, hi;
        const void *src[STRATA_MAX_DEVICES];
        void *dst[STRATA_MAX_DEVICES];
        int nd = 0;

        for (int r = 0; r < c->n; r++) {
                src[r] = strata__comm_peer(c, rank, r)->send;
                if (all || r == op->root)
                        dst[nd++] = strata__comm_peer(c, rank, r)->recv;
        }
        slice(op->count, es, c->n, rank, &lo, &hi);
        strata__comm_reduce(c, op, dst, nd, src, c->n, lo, hi,
                            op->count * es >= NT_BYTES);
        return STRATA_OK;
}

static int reduce(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        return reduce_to(c, rank, op, 0);
}

static int all_reduce(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        return reduce_to(c, rank, op, 1);
}

static int all_gather(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype), off = (size_t)rank * op->count * es;
        void *dst[STRATA_MAX_DEVICES];

        for (int r = 0; r < c->n; r++)
                dst[r] = (char *)strata__comm_peer(c, rank, r)->recv + off;
        strata__comm_copy(c, dst, c->n, (const char *)op->send, 0, op->count * es,
                          op->count * es * (size_t)c->n >= NT_BYTES);
        return STRATA_OK;
}

static int reduce_scatter(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype), off = (size_t)rank * op->count * es;
        const void *src[STRATA_MAX_DEVICES];
        void *dst[1] = { op->recv };

        for (int r = 0; r < c->n; r++)
                src[r] = (const char *)strata__comm_peer(c, rank, r)->send + off;
        strata__comm_reduce(c, op, dst, 1, src, c->n, 0, op->count,
                            op->count * es * (size_t)c->n >= NT_BYTES);
        return STRATA_OK;
}

static int gather(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype);
        void *dst[1] = { (char *)strata__comm_peer(c, rank, op->root)->recv +
                         (size_t)rank * op->count * es };

        strata__comm_copy(c, dst, 1, op->send, 0, op->count * es, 0);
        return STRATA_OK;
}

static int scatter(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype);
        void *dst[1] = { op->recv };

        strata__comm_copy(c, dst, 1,
                          (const char *)strata__comm_peer(c, rank, op->root)->send +
                                  (size_t)rank * op->count * es,
                          0, op->count * es, 0);
        return STRATA_OK;
}

/*
 * Collectives over blocks (comm_internal.h): this rank's slice of the span, as a reduce or a
 * broadcast of the whole span would slice it, piece by piece of the owners it meets. A reduce
 * sums each element from every rank in the world's order into its owner's receive buffer (the
 * bits of one reduce per piece); a gather copies it from its owner to every rank. A checked
 * reduce (comm_blocks.h) also tells whether a sum it stored is not finite.
 */
static int blocks(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        const struct strata__blocks *geo = strata__comm_blocks(c, rank, rank);
        size_t es = strata_dtype_size(op->dtype), lo, hi;
        int rs = (int)op->kind == STRATA__COLL_RS_BLOCKS, nt = op->count * es >= NT_BYTES, check;
        const void *src[STRATA_MAX_DEVICES];
        void *dst[STRATA_MAX_DEVICES];

        slice(op->count, es, c->n, rank, &lo, &hi);
        check = rs && c->flag[rank].check;
        c->flag[rank].checked = (unsigned char)check; /* every piece below, or none */
        for (int r = 0; rs && r < c->n; r++)
                src[r] = strata__comm_peer(c, rank, r)->send;
        for (int g = lo < hi ? strata__blocks_owner(geo, lo) : c->n; g < c->n; g++) {
                const struct strata_coll *o = strata__comm_peer(c, rank, g);
                size_t a, e, x, y;
                int nd = 0;

                strata__blocks_piece(geo, op->count, g, &a, &e);
                if (a >= hi)
                        break;
                x = a > lo ? a : lo;
                y = e < hi ? e : hi;
                if (x >= y)
                        continue;
                if (rs) { /* the owner's receive buffer indexed by span element */
                        dst[0] = (char *)o->recv - a * es;
                        if (check)
                                strata__comm_reduce_check(c, rank, op, dst[0], src, c->n, x,
                                                          y, nt);
                        else
                                strata__comm_reduce(c, op, dst, 1, src, c->n, x, y, nt);
                        continue;
                }
                for (int r = 0; r < c->n; r++)
                        if (strata__comm_peer(c, rank, r)->recv != (const char *)o->send - a * es)
                                dst[nd++] = strata__comm_peer(c, rank, r)->recv;
                strata__comm_copy(c, dst, nd, (const char *)o->send - a * es, x * es, y * es,
                                  nt);
        }
        return STRATA_OK;
}

/* Each kind's data movement: local rank @p rank's share, read from its peers' buffers. */
static int (*const run[STRATA__COLL_KINDS])(struct strata_comm *c, int rank,
                                           const struct strata_coll *op) = {
        [STRATA_COLL_BROADCAST] = broadcast,
        [STRATA_COLL_REDUCE] = reduce,
        [STRATA_COLL_ALL_REDUCE] = all_reduce,
        [STRATA_COLL_ALL_GATHER] = all_gather,
        [STRATA_COLL_REDUCE_SCATTER] = reduce_scatter,
        [STRATA_COLL_GATHER] = gather,
        [STRATA_COLL_SCATTER] = scatter,
        [STRATA__COLL_RS_BLOCKS] = blocks,
        [STRATA__COLL_AG_BLOCKS] = blocks,
};

/* An agreed collective with data; nothing else moves anything. */
static int move(struct strata_comm *c, int rank, const struct strata_coll *op, int status)
{
        if (status != STRATA_OK || op->kind == STRATA_COLL_BARRIER || !op->count)
                return status;
        return run[op->kind](c, rank, op);
}

const struct strata__transport strata__shm_transport = {
        .name = "shm",
        .probe = shm_probe,
        .move = move,
        .eager = 1,
        .slice = slice,
};
