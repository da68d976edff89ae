/*
 * The net transport's direct schedules, for 2 to 4 processes (drivers/net/net.c says when):
 * one step reaches every peer. A small reduction's step carries every local rank's slice to
 * every process, which reduces the slices of all ranks itself; from 64 KiB each process
 * receives only its part, reduces it and sends the result back (split_rounds); reduce_scatter,
 * scatter, broadcast, all_gather likewise. Each step starts with a header holding the call's
 * arguments, seen by every process (strata__net_exchange_to). Reductions combine every element
 * in global rank order, as one process's shm transport does.
 */
#include <string.h>

#include "strata/status.h"
#include "arch/reduce.h"
#include "drivers/net/link.h"

/*
 * This process's data for bytes [off, off + bytes) of every local rank's buffer, one after the
 * other: straight from the buffer when there is one rank, else gathered into the staging block.
 */
static const void *local_data(struct strata_comm *c, size_t off, size_t bytes)
{
        unsigned char *pack = strata__net_st(c)->pack;

        for (int r = 0; r < c->n; r++) {
                const unsigned char *send =
                        (const unsigned char *)strata__comm_peer(c, 0, r)->send + off;

                if (c->n == 1)
                        return send;
                memcpy(pack + (size_t)r * bytes, send, bytes);
        }
        return pack;
}

/* Reduction rounds: each round exchanges every rank's slice [lo, hi) and reduces it. */
int strata__net_reduce_rounds(struct strata_comm *c, const struct strata_coll *op,
                              struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = strata__net_per_round(c, es);
        int n = c->n, P = strata__net_st(c)->net->size, root_local = op->root - c->rank0;
        int o = strata__comm_world_op(op->op, op->dtype, c->world);
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_DIRECT];
        const unsigned char *data[STRATA__NET_DIRECT];
        int nd = 0, check;

        for (int r = 0; r < n; r++)
                if (op->kind == STRATA_COLL_ALL_REDUCE || r == root_local)
                        dst[nd++] = strata__comm_peer(c, 0, r)->recv;
        /* A checked all-reduce of one local rank (comm_blocks.h): this process stores every
         * sum, so its check in their pass is the whole vector's (decision 0110). */
        check = op->kind == STRATA_COLL_ALL_REDUCE && op->dtype == STRATA_F32 && n == 1 &&
                c->flag[0].check && !c->dev;
        c->flag[0].checked = (unsigned char)check;
        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per, bytes = (hi - lo) * es;

                STRATA_TRY(strata__net_exchange(c, h, local_data(c, lo * es, bytes),
                                                bytes * (size_t)n, data));
                /* Global rank order: process 0's ranks, then process 1's, ... Pointers are
                 * offset by lo so the kernel indexes every source by element number. */
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = data[p] + (size_t)r * bytes - lo * es;
                if (check)
                        strata__comm_reduce_check(c, 0, op, dst[0], src, P * n, lo, hi, 0);
                else if (nd) /* a reduce whose root is in another process: nothing here */
                        strata__reduce_many(op->dtype, o, dst, nd, src, P * n, lo, hi, 0);
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

/* Process @p q's part [*a, *b) of elements [lo, hi): cache-line boundaries, as shm's slices. */
static void part(size_t lo, size_t hi, size_t es, int procs, int q, size_t *a, size_t *b)
{
        size_t line = 64 / es ? 64 / es : 1, n = hi - lo;
        size_t x = lo + n * (size_t)q / (size_t)procs, y = lo + n * (size_t)(q + 1) / (size_t)procs;

        x = (x + line - 1) / line * line;
        y = q == procs - 1 ? hi : (y + line - 1) / line * line;
        *a = x < hi ? x : hi;
        *b = y < hi ? y : hi;
}

/*
 * Large all-reduces, per round: every process p owns a part of the elements; each sends every
 * other process its local ranks' slices of that process's part (a reduce-scatter), reduces its
 * own part from every rank of every process in global rank order (so the bits are those of the
 * unsplit path), and sends the result to every process (an all-gather). Each process moves
 * (P-1)/P of the data each way instead of all of it to every peer.
 */
int strata__net_split_rounds(struct strata_comm *c, const struct strata_coll *op,
                             struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = strata__net_per_round(c, es);
        int n = c->n, P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank;
        int o = strata__comm_world_op(op->op, op->dtype, c->world);
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_DIRECT], *out[STRATA__NET_DIRECT];
        const unsigned char *in[STRATA__NET_DIRECT];
        size_t len[STRATA__NET_DIRECT], a[STRATA__NET_DIRECT], b[STRATA__NET_DIRECT];
        unsigned char *pack = strata__net_st(c)->pack;

        for (int r = 0; r < n; r++)
                dst[r] = strata__comm_peer(c, 0, r)->recv;
        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per;

                /* Reduce-scatter: process q gets every local rank's slice of its part; with
                 * several local ranks they are packed part by part, rank by rank. */
                for (int q = 0; q < P; q++) {
                        part(lo, hi, es, P, q, &a[q], &b[q]);
                        len[q] = (b[q] - a[q]) * es * (size_t)n;
                        if (n == 1) {
                                out[q] = (const unsigned char *)strata__comm_peer(c, 0, 0)->send +
                                         a[q] * es;
                                continue;
                        }
                        out[q] = pack + (a[q] - lo) * es * (size_t)n;
                        for (int r = 0; r < n; r++)
                                memcpy(pack + ((a[q] - lo) * (size_t)n +
                                               (size_t)r * (b[q] - a[q])) * es,
                                       (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                               a[q] * es,
                                       (b[q] - a[q]) * es);
                }
                in[me] = out[me];
                STRATA_TRY(strata__net_exchange_to(c, h, out, len, in));
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = in[p] + (size_t)r * (b[me] - a[me]) * es -
                                                 a[me] * es;
                strata__reduce_many(op->dtype, o, dst, n, src, P * n, a[me], b[me], 0);
                /* All-gather: this process's part of the result to every other. */
                STRATA_TRY(strata__net_exchange(c, h, (const unsigned char *)dst[0] + a[me] * es,
                                                (b[me] - a[me]) * es, in));
                for (int q = 0; q < P; q++)
                        for (int r = 0; q != me && r < n; r++)
                                memcpy((unsigned char *)dst[r] + a[q] * es, in[q],
                                       (b[q] - a[q]) * es);
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

/* broadcast (the root's process sends) and all_gather / gather (every process sends). */
int strata__net_copy_rounds(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = strata__net_per_round(c, es);
        int n = c->n, P = strata__net_st(c)->net->size, bcast = op->kind == STRATA_COLL_BROADCAST;
        int root_proc = op->root / n, root_local = op->root - c->rank0;
        const unsigned char *data[STRATA__NET_DIRECT];

        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per, bytes = (hi - lo) * es;
                const void *mine = NULL;
                size_t len = 0;

                if (!bcast) {
                        mine = local_data(c, lo * es, bytes);
                        len = bytes * (size_t)n;
                } else if (strata__net_st(c)->net->rank == root_proc) {
                        mine = (const unsigned char *)strata__comm_peer(c, 0, root_local)->recv +
                               lo * es;
                        len = bytes;
                }
                STRATA_TRY(strata__net_exchange(c, h, mine, len, data));
                for (int r = 0; r < n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (bcast) {
                                if (strata__net_st(c)->net->rank != root_proc || r != root_local)
                                        memcpy(recv + lo * es, data[root_proc], bytes);
                                continue;
                        }
                        if (op->kind == STRATA_COLL_GATHER && c->rank0 + r != op->root)
                                continue;
                        for (int p = 0; p < P; p++)
                                for (int q = 0; q < n; q++)
                                        memmove(recv + ((size_t)(p * n + q) * op->count + lo) * es,
                                                data[p] + (size_t)q * bytes, bytes);
                }
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

/*
 * reduce_scatter and scatter deal in regions: process q's ranks receive the blocks of global
 * ranks q * n .. q * n + n - 1, elements [q * n * count, (q + 1) * n * count) of every send
 * buffer. A round carries elements [lo, hi) of a region; local rank @p r's block of them is
 * [*a, *b) (empty when *a == *b).
 */
static void block_part(size_t lo, size_t hi, size_t count, int r, size_t *a, size_t *b)
{
        size_t x = count * (size_t)r, y = x + count;

        *a = x > lo ? x : lo;
        *b = y < hi ? y : hi;
        if (*a > *b)
                *a = *b;
}

/*
 * What this process sends in a reduce_scatter round: to every other process q, each local
 * rank's elements [lo, hi) of q's region; with several local ranks they are packed process by
 * process, rank by rank.
 */
static void rs_pack(struct strata_comm *c, const struct strata_coll *op, size_t lo, size_t hi,
                    const void **out, size_t *len)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n;
        size_t bytes = (hi - lo) * es;
        int n = c->n, me = strata__net_st(c)->net->rank;
        unsigned char *pack = strata__net_st(c)->pack;

        for (int q = 0, j = 0; q < strata__net_st(c)->net->size; q++) {
                size_t from = ((size_t)q * region + lo) * es;

                out[q] = NULL;
                len[q] = q == me ? 0 : bytes * (size_t)n;
                if (q == me)
                        continue;
                if (n == 1) {
                        out[q] = (const unsigned char *)strata__comm_peer(c, 0, 0)->send + from;
                        continue;
                }
                out[q] = pack + (size_t)j * len[q];
                for (int r = 0; r < n; r++)
                        memcpy(pack + ((size_t)j * (size_t)n + (size_t)r) * bytes,
                               (const unsigned char *)strata__comm_peer(c, 0, r)->send + from,
                               bytes);
                j++;
        }
}

/*
 * Local rank @p r's part of a reduce_scatter round: its elements of [lo, hi) reduced from every
 * rank of every process in global rank order (this process's straight from the send buffers),
 * so the bits are those of one process's reduce_scatter.
 */
static void rs_reduce(struct strata_comm *c, const struct strata_coll *op,
                      const unsigned char *const *in, size_t lo, size_t hi, int r)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n, a, b;
        int n = c->n, P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank;
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_DIRECT];
        void *dst[1];

        block_part(lo, hi, op->count, r, &a, &b);
        if (a == b)
                return;
        dst[0] = (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                 (a - op->count * (size_t)r) * es;
        for (int p = 0; p < P; p++)
                for (int s = 0; s < n; s++)
                        src[p * n + s] = p == me
                                ? (const unsigned char *)strata__comm_peer(c, 0, s)->send +
                                          ((size_t)me * region + a) * es
                                : in[p] + ((size_t)s * (hi - lo) + a - lo) * es;
        strata__reduce_many(op->dtype, strata__comm_world_op(op->op, op->dtype, c->world), dst, 1,
                            src, P * n, 0, b - a, 0);
}

/*
 * reduce_scatter: each round, every process sends every other its local ranks' elements of
 * that process's region, and reduces its own region's round from what came in. In all, each
 * process sends each other n x n x count elements (its n ranks' copies of the other's n
 * blocks) and receives as many: only the blocks its ranks receive, never the whole buffers.
 */
int strata__net_rs_rounds(struct strata_comm *c, const struct strata_coll *op,
                          struct strata__net_head *h)
{
        int P = strata__net_st(c)->net->size;
        size_t region = op->count * (size_t)c->n;
        size_t per =
                strata__net_per_share(strata_dtype_size(op->dtype), (size_t)(P - 1) * (size_t)c->n);
        const void *out[STRATA__NET_DIRECT];
        const unsigned char *in[STRATA__NET_DIRECT];
        size_t len[STRATA__NET_DIRECT];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                rs_pack(c, op, lo, hi, out, len);
                STRATA_TRY(strata__net_exchange_to(c, h, out, len, in));
                for (int r = 0; r < c->n; r++)
                        rs_reduce(c, op, in, lo, hi, r);
                if (hi >= region)
                        return STRATA_OK;
        }
}

/* Elements [lo, hi) of this process's region, from @p from, into its local ranks' blocks. */
static void spread(struct strata_comm *c, const struct strata_coll *op, const unsigned char *from,
                   size_t lo, size_t hi)
{
        size_t es = strata_dtype_size(op->dtype), a, b;

        for (int r = 0; r < c->n; r++) {
                block_part(lo, hi, op->count, r, &a, &b);
                if (a < b)
                        memcpy((unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                       (a - op->count * (size_t)r) * es,
                               from + (a - lo) * es, (b - a) * es);
        }
}

/*
 * scatter: each round, the root's process sends every other process elements [lo, hi) of that
 * process's region of the root's buffer (n x count elements to each in all, what its ranks
 * receive); the others send nothing. The root's own process copies its region locally.
 */
int strata__net_scatter_rounds(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n;
        int P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank,
            root_proc = op->root / c->n;
        size_t per = strata__net_per_share(es, (size_t)(P - 1));
        const unsigned char *send =
                me == root_proc ? strata__comm_peer(c, 0, op->root - c->rank0)->send : NULL;
        const void *out[STRATA__NET_DIRECT];
        const unsigned char *in[STRATA__NET_DIRECT];
        size_t len[STRATA__NET_DIRECT];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                for (int q = 0; q < P; q++) {
                        out[q] = send ? send + ((size_t)q * region + lo) * es : NULL;
                        len[q] = send && q != me ? (hi - lo) * es : 0;
                }
                STRATA_TRY(strata__net_exchange_to(c, h, out, len, in));
                spread(c, op, send ? send + ((size_t)me * region + lo) * es : in[root_proc], lo,
                       hi);
                if (hi >= region)
                        return STRATA_OK;
        }
}
