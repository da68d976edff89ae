/*
 * The net transport's butterfly schedules, from 5 processes (drivers/net/net.c says when):
 * every collective starts with the steps of recursive doubling over the world's W = 2^k + r
 * ranks (virtual ranks: the first r pairs of ranks fold into one first), whose headers spread
 * the arguments and every refusal to every process in k + 2 steps; a small reduction's data
 * rides on them (recursive doubling). A large one then runs recursive halving (a
 * reduce-scatter, log W steps) and doubling (an all-gather) per round; broadcast and scatter
 * follow a binomial tree, all_gather and gather Bruck's dissemination. Local ranks are virtual
 * ranks of their own: a step between two ranks of one process is a local sum, and only the
 * others become messages, so a process sends at most one message per local rank per step.
 */
#include <stdint.h>
#include <string.h>

#include "strata/status.h"
#include "arch/reduce.h"
#include "base/base.h"
#include "drivers/net/link.h"

struct strata__net_world strata__net_world_of(const struct strata_comm *c)
{
        struct strata__net_world w = { .W = c->world, .q = 1, .n = c->n, .g0 = c->rank0,
                                       .me = strata__net_st(c)->net->rank };

        while (w.q * 2 <= w.W) {
                w.q *= 2;
                w.k++;
        }
        w.r = w.W - w.q;
        w.lane = STRATA__NET_DATA / (size_t)w.n / 64 * 64;
        return w;
}

/* A butterfly step's messages: local rank @p l sends @p bytes of @p data to global rank @p g
 * (when in another process) and receives up to its lane from it. */
void strata__net_swap(struct strata__net_msgs *x, const struct strata__net_world *w,
                      struct strata__net_state *s, int l, int g, const void *data, size_t bytes,
                      int *rix)
{
        if (strata__net_is_local(w, g))
                return;
        strata__net_to(x, g / w->n, data, bytes);
        rix[l] = x->nr;
        strata__net_from(x, g / w->n, s->in + (size_t)l * w->lane, w->lane);
}

/* Spread what the received headers say into @p h: the first refusal seen, and by whom. */
static void hear(struct strata__net_head *h, const struct strata__net_msgs *x)
{
        for (int i = 0; i < x->nr && !h->bad; i++) {
                struct strata__net_head o;

                memcpy(&o, x->r[i].head, sizeof(o));
                if (o.bad) {
                        h->bad = o.bad;
                        h->who = o.who;
                } else if (o.status != STRATA_OK || !strata__net_agrees(h, &o)) {
                        h->bad = STRATA_EINVAL;
                        h->who = x->r[i].peer;
                }
        }
}

/* dst[0..nd) over [a, b) = lower + upper, pointers at element 0 of the round. */
void strata__net_combine(const struct strata__net_red *d, unsigned char *const *dst, int nd,
                         const unsigned char *lower, const unsigned char *upper, size_t a, size_t b)
{
        const void *src[2] = { lower, upper };

        strata__reduce_many(d->dt, d->cop, (void *const *)dst, nd, src, 2, a, b, 0);
}

/*
 * The first r pairs fold: each odd rank's data to its even one, which sums (even + odd).
 * Without pairs (r 0) nothing moves: each rank's own data is its sum so far.
 */
int strata__net_pre_step(struct strata_comm *c, struct strata__net_head *h,
                         const struct strata__net_world *w, struct strata__net_red *d)
{
        struct strata__net_state *s = strata__net_st(c);
        struct strata__net_msgs x = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES];
        size_t bytes = d ? d->m * d->es : 0;

        if (!w->r) {
                for (int l = 0; d && l < w->n; l++)
                        d->cur[l] = d->src[l];
                return STRATA_OK;
        }
        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l;

                if (d)
                        d->cur[l] = strata__net_vrank(w, g) < 0 ? NULL : d->src[l];
                if (g < 2 * w->r)
                        strata__net_swap(&x, w, s, l, g ^ 1, d ? d->src[l] : NULL,
                                         g & 1 ? bytes : 0, rix);
        }
        STRATA_TRY(strata__net_step(c, h, &x));
        hear(h, &x);
        for (int l = 0; d && l < w->n; l++) {
                int g = w->g0 + l;
                unsigned char *acc = s->acc + (size_t)l * w->lane;

                if (g >= 2 * w->r || g & 1)
                        continue;
                strata__net_combine(d, &acc, 1, d->src[l],
                                    strata__net_is_local(w, g + 1) ? d->src[l + 1]
                                                                   : x.r[rix[l]].data,
                                    0, d->m);
                d->cur[l] = acc;
        }
        return STRATA_OK;
}

/* The even rank of each first pair sends the result (@p m elements of @p sum) to the odd one;
 * a process whose ranks are all such odd ones gets it in @p *sum. Nothing without pairs. */
static int post_step(struct strata_comm *c, struct strata__net_head *h,
                     const struct strata__net_world *w, const struct strata__net_red *d,
                     const unsigned char **sum)
{
        struct strata__net_state *s = strata__net_st(c);
        struct strata__net_msgs x = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES] = { -1 };
        size_t bytes = d ? d->m * d->es : 0;

        if (!w->r)
                return STRATA_OK;
        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l;

                rix[l] = -1;
                if (g < 2 * w->r)
                        strata__net_swap(&x, w, s, l, g ^ 1, *sum, g & 1 ? 0 : bytes, rix);
        }
        STRATA_TRY(strata__net_step(c, h, &x));
        hear(h, &x);
        for (int l = 0; l < w->n && !*sum; l++)
                if (rix[l] >= 0 && (w->g0 + l) & 1)
                        *sum = x.r[rix[l]].data;
        return STRATA_OK;
}

/*
 * Recursive doubling over the virtual ranks: at distance 1, 2, ..., q/2 each virtual rank
 * swaps its partial sums with its partner and both keep (lower + upper). With @p d NULL, the
 * headers alone. A pair in one process is a local sum, done once into both partials.
 */
static int doubling(struct strata_comm *c, struct strata__net_head *h,
                    const struct strata__net_world *w, struct strata__net_red *d)
{
        struct strata__net_state *s = strata__net_st(c);

        for (int dist = 1; dist < w->q; dist *= 2) {
                struct strata__net_msgs x = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES];

                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l);

                        if (v >= 0)
                                strata__net_swap(&x, w, s, l, strata__net_grank(w, v ^ dist),
                                                 d ? d->cur[l] : NULL, d ? d->m * d->es : 0, rix);
                }
                STRATA_TRY(strata__net_step(c, h, &x));
                hear(h, &x);
                for (int l = 0; d && l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l), gu, lu;
                        unsigned char *acc[2];
                        const unsigned char *other;

                        if (v < 0)
                                continue;
                        gu = strata__net_grank(w, v ^ dist);
                        lu = gu - w->g0;
                        acc[0] = s->acc + (size_t)l * w->lane;
                        if (strata__net_is_local(w, gu)) {
                                if (v & dist)
                                        continue; /* done by the lower one */
                                acc[1] = s->acc + (size_t)lu * w->lane;
                                strata__net_combine(d, acc, 2, d->cur[l], d->cur[lu], 0, d->m);
                                d->cur[l] = acc[0];
                                d->cur[lu] = acc[1];
                                continue;
                        }
                        other = x.r[rix[l]].data;
                        strata__net_combine(d, acc, 1, v & dist ? other : d->cur[l],
                                            v & dist ? d->cur[l] : other, 0, d->m);
                        d->cur[l] = acc[0];
                }
        }
        return STRATA_OK;
}

/*
 * The butterfly every collective of 5 processes or more starts with: the pairs fold, doubling,
 * the pairs unfold; k + 2 steps (k without pairs). Its headers bring every process's
 * arguments and refusals to every process; with @p d, a small reduction rides on it and
 * *sum points at its result. The verdict is the same everywhere.
 */
int strata__net_butterfly(struct strata_comm *c, struct strata__net_head *h,
                          struct strata__net_red *d, const unsigned char **sum)
{
        struct strata__net_world w = strata__net_world_of(c);

        *sum = NULL;
        STRATA_TRY(strata__net_pre_step(c, h, &w, d));
        STRATA_TRY(doubling(c, h, &w, d));
        for (int l = 0; d && l < w.n && !*sum; l++)
                *sum = d->cur[l];
        STRATA_TRY(post_step(c, h, &w, d, sum));
        if (!h->bad)
                return STRATA_OK;
        if (h->status != STRATA_OK)
                return h->status;
        return strata__fail(STRATA_EINVAL, "process %d passed bad arguments, or processes "
                            "disagree on the collective", h->who);
}

/* Virtual rank @p v's segment of [0, m) before halving step @p j: halved j times. */
static void segment(const struct strata__net_red *d, int v, int j, size_t *a, size_t *b)
{
        size_t line = 64 / d->es ? 64 / d->es : 1;

        *a = 0;
        *b = d->m;
        for (int i = 0; i < j; i++) {
                size_t mid = *a + ((*b - *a) / 2 + line - 1) / line * line;

                if (mid > *b)
                        mid = *b;
                if (v >> i & 1)
                        *a = mid;
                else
                        *b = mid;
        }
}

/*
 * Recursive halving (a reduce-scatter): at distance 1, 2, ..., q/2 each virtual rank sends
 * its partner the half of its segment the partner keeps and sums the half it keeps (lower +
 * upper); at the end virtual rank v holds the sum of its segment, copied into res.
 */
static int halving(struct strata_comm *c, struct strata__net_head *h,
                   const struct strata__net_world *w, struct strata__net_red *d)
{
        struct strata__net_state *s = strata__net_st(c);

        for (int j = 0; j < w->k; j++) {
                struct strata__net_msgs x = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES], dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l);
                        size_t a, b;

                        if (v < 0)
                                continue;
                        segment(d, v ^ dist, j + 1, &a, &b); /* what the partner keeps */
                        strata__net_swap(&x, w, s, l, strata__net_grank(w, v ^ dist),
                                         d->cur[l] + a * d->es, (b - a) * d->es, rix);
                }
                STRATA_TRY(strata__net_step(c, h, &x));
                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l), gu;
                        unsigned char *acc = s->acc + (size_t)l * w->lane;
                        const unsigned char *other;
                        size_t a, b;

                        if (v < 0)
                                continue;
                        gu = strata__net_grank(w, v ^ dist);
                        segment(d, v, j + 1, &a, &b);
                        other = strata__net_is_local(w, gu)
                                        ? d->cur[gu - w->g0]
                                        : (const unsigned char *)x.r[rix[l]].data - a * d->es;
                        strata__net_combine(d, &acc, 1, v & dist ? other : d->cur[l],
                                            v & dist ? d->cur[l] : other, a, b);
                }
                for (int l = 0; l < w->n; l++)
                        if (strata__net_vrank(w, w->g0 + l) >= 0)
                                d->cur[l] = s->acc + (size_t)l * w->lane;
        }
        for (int l = 0; l < w->n; l++) {
                int v = strata__net_vrank(w, w->g0 + l);
                size_t a, b;

                if (v < 0)
                        continue;
                segment(d, v, w->k, &a, &b);
                memcpy(s->res + a * d->es, d->cur[l] + a * d->es, (b - a) * d->es);
        }
        return STRATA_OK;
}

/* Recursive doubling of segments (an all-gather) into res: at distance q/2, ..., 1. */
static int gathering(struct strata_comm *c, struct strata__net_head *h,
                     const struct strata__net_world *w, const struct strata__net_red *d)
{
        struct strata__net_state *s = strata__net_st(c);

        for (int j = w->k - 1; j >= 0; j--) {
                struct strata__net_msgs x = { .ns = 0 };
                int dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l), gu;
                        size_t a, b, pa, pb;

                        if (v < 0 || strata__net_is_local(w, (gu = strata__net_grank(w, v ^ dist))))
                                continue;
                        segment(d, v, j + 1, &a, &b);
                        segment(d, v ^ dist, j + 1, &pa, &pb);
                        strata__net_to(&x, gu / w->n, s->res + a * d->es, (b - a) * d->es);
                        strata__net_from(&x, gu / w->n, s->res + pa * d->es, (pb - pa) * d->es);
                }
                STRATA_TRY(strata__net_step(c, h, &x));
                for (int i = 0; i < x.nr; i++)
                        if (x.r[i].data != x.r[i].into)
                                memcpy(x.r[i].into, x.r[i].data, x.r[i].bytes);
        }
        return STRATA_OK;
}

/* A large reduction's round: the pairs fold, halving, gathering, the pairs unfold; the sum in
 * res (or where the post step left it: *sum). */
int strata__net_tree_round(struct strata_comm *c, struct strata__net_head *h,
                           struct strata__net_red *d, const unsigned char **sum)
{
        struct strata__net_world w = strata__net_world_of(c);

        STRATA_TRY(strata__net_pre_step(c, h, &w, d));
        STRATA_TRY(halving(c, h, &w, d));
        STRATA_TRY(gathering(c, h, &w, d));
        *sum = NULL;
        for (int l = 0; l < w.n && !*sum; l++)
                if (strata__net_vrank(&w, w.g0 + l) >= 0)
                        *sum = strata__net_st(c)->res;
        STRATA_TRY(post_step(c, h, &w, d, sum));
        return STRATA_OK;
}

/* Whether the butterfly can sum @p op in the world's order: not half precision (summed in
 * f32 in rank order), and the pairwise tree only where it is halving's (2^k ranks). */
int strata__net_tree_op(const struct strata_coll *op, int world)
{
        if (op->dtype == STRATA_BF16 || op->dtype == STRATA_F16)
                return 0;
        return op->op != STRATA_OP_SUM_TREE || !(world & (world - 1)) ||
               op->dtype == STRATA_I32 || op->dtype == STRATA_I64;
}

void strata__net_red_init(struct strata__net_red *d, const struct strata_comm *c,
                          const struct strata_coll *op)
{
        d->dt = op->dtype;
        d->es = strata_dtype_size(op->dtype);
        d->cop = op->op == STRATA_OP_MEAN || op->op == STRATA_OP_SUM_TREE ? STRATA__SUM
                                                                           : (int)op->op;
        (void)c;
}

/* Elements [0, m) of @p sum into @p to: copied, or divided by the world for a mean (as the
 * kernels' mean divides the sum). */
#define MEAN_OF(T)                                                                             \
        do {                                                                                   \
                for (size_t i = 0; i < m; i++)                                                 \
                        ((T *)out)[i] = (T)(((const T *)sum)[i] / (T)world);                   \
        } while (0)

void strata__net_deliver(const struct strata_coll *op, int world, void *out, const void *sum,
                         size_t m)
{
        if (op->op != STRATA_OP_MEAN) {
                if (out != sum)
                        memcpy(out, sum, m * strata_dtype_size(op->dtype));
        } else if (op->dtype == STRATA_F32) {
                MEAN_OF(float);
        } else if (op->dtype == STRATA_F64) {
                MEAN_OF(double);
        } else if (op->dtype == STRATA_I32) {
                MEAN_OF(int32_t);
        } else {
                MEAN_OF(int64_t);
        }
}

/* A reduction's result for elements [lo, lo + m): every local rank's, or the root's. */
void strata__net_finish(struct strata_comm *c, const struct strata_coll *op,
                        const unsigned char *sum, size_t lo, size_t m)
{
        size_t es = strata_dtype_size(op->dtype);

        for (int r = 0; r < c->n; r++)
                if (op->kind == STRATA_COLL_ALL_REDUCE || c->rank0 + r == op->root)
                        strata__net_deliver(op, c->world,
                                            (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                                    lo * es,
                                            sum, m);
}

/* Elements per round of a large reduction: every local rank's partial sums in its lane. */
static size_t tree_per(const struct strata_comm *c, size_t es)
{
        return strata__net_world_of(c).lane / es;
}

/* all_reduce and reduce, round by round after the butterfly agreed. */
int strata__net_tree_reduce(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = tree_per(c, es);
        struct strata__net_red d;
        const unsigned char *sum;

        strata__net_red_init(&d, c, op);
        for (size_t lo = 0; lo < op->count; lo += per) {
                d.m = op->count - lo < per ? op->count - lo : per;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                   lo * es;
                STRATA_TRY(strata__net_tree_round(c, h, &d, &sum));
                strata__net_finish(c, op, sum, lo, d.m);
        }
        return STRATA_OK;
}

/* reduce_scatter: the whole buffer reduced round by round, each local rank keeping its block. */
int strata__net_tree_reduce_scatter(struct strata_comm *c, const struct strata_coll *op,
                                    struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = tree_per(c, es);
        size_t all = op->count * (size_t)c->world;
        struct strata__net_red d;
        const unsigned char *sum;

        strata__net_red_init(&d, c, op);
        for (size_t lo = 0; lo < all; lo += per) {
                d.m = all - lo < per ? all - lo : per;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                   lo * es;
                STRATA_TRY(strata__net_tree_round(c, h, &d, &sum));
                for (int r = 0; r < c->n; r++) {
                        size_t x = op->count * (size_t)(c->rank0 + r), y = x + op->count;
                        size_t a = x > lo ? x : lo, b = y < lo + d.m ? y : lo + d.m;

                        if (a < b)
                                strata__net_deliver(op, c->world,
                                        (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                                (a - x) * es,
                                        sum + (a - lo) * es, b - a);
                }
        }
        return STRATA_OK;
}

/*
 * A binomial tree from process @p root: @p bytes at @p buf (the root's data; elsewhere where
 * it lands) reach every process in ceil(log2 P) steps.
 */
static int binomial(struct strata_comm *c, struct strata__net_head *h, int root, unsigned char *buf,
                    const unsigned char *from_root, size_t bytes)
{
        int P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank,
            rel = (me - root + P) % P;

        for (int mask = 1; mask < P; mask *= 2) {
                struct strata__net_msgs x = { .ns = 0 };

                if (rel < mask && rel + mask < P)
                        strata__net_to(&x, (rel + mask + root) % P, rel ? buf : from_root, bytes);
                else if (rel >= mask && rel < 2 * mask)
                        strata__net_from(&x, (rel - mask + root) % P, buf, bytes);
                STRATA_TRY(strata__net_step(c, h, &x));
                if (x.nr && x.r[0].data != buf)
                        memcpy(buf, x.r[0].data, x.r[0].bytes);
        }
        return STRATA_OK;
}

/* broadcast: the root's buffer, a round of at most STRATA__NET_DATA at a time. */
int strata__net_tree_broadcast(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = STRATA__NET_DATA / es;
        int root_proc = op->root / c->n, mine = strata__net_st(c)->net->rank == root_proc;
        unsigned char *root_buf = mine ? strata__comm_peer(c, 0, op->root - c->rank0)->recv
                                       : NULL;

        for (size_t lo = 0; lo < op->count; lo += per) {
                size_t m = op->count - lo < per ? op->count - lo : per;
                unsigned char *buf = mine ? root_buf + lo * es : strata__net_st(c)->res;

                STRATA_TRY(binomial(c, h, root_proc, buf, buf, m * es));
                for (int r = 0; r < c->n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (recv + lo * es != buf)
                                memcpy(recv + lo * es, buf, m * es);
                }
        }
        return STRATA_OK;
}

/* scatter: the root's whole send buffer through the tree, round by round; each process keeps
 * its ranks' blocks. */
int strata__net_tree_scatter(struct strata_comm *c, const struct strata_coll *op,
                             struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = STRATA__NET_DATA / es;
        size_t all = op->count * (size_t)c->world;
        int root_proc = op->root / c->n, mine = strata__net_st(c)->net->rank == root_proc;
        const unsigned char *send =
                mine ? strata__comm_peer(c, 0, op->root - c->rank0)->send : NULL;

        for (size_t lo = 0; lo < all; lo += per) {
                size_t m = all - lo < per ? all - lo : per;

                STRATA_TRY(binomial(c, h, root_proc, strata__net_st(c)->res,
                                    send ? send + lo * es : NULL, m * es));
                for (int r = 0; r < c->n; r++) {
                        size_t x = op->count * (size_t)(c->rank0 + r), y = x + op->count;
                        size_t a = x > lo ? x : lo, b = y < lo + m ? y : lo + m;
                        const unsigned char *got = send ? send + a * es
                                                        : strata__net_st(c)->res + (a - lo) * es;

                        if (a < b)
                                memcpy((unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                               (a - x) * es,
                                       got, (b - a) * es);
                }
        }
        return STRATA_OK;
}

/*
 * all_gather and gather: Bruck's dissemination over processes, a round of every rank's
 * elements [lo, hi) at a time. res holds blocks rotated (position j: process me + j), so each
 * step sends one contiguous piece; at the end they are unpacked into every local rank's
 * receive buffer (gather: the root's only).
 */
int strata__net_tree_gather(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype);
        size_t per = STRATA__NET_DATA / ((size_t)c->world * es);
        int P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank, n = c->n;
        unsigned char *res = strata__net_st(c)->res;

        per = per ? per : 1;
        for (size_t lo = 0; lo < op->count; lo += per) {
                size_t m = op->count - lo < per ? op->count - lo : per, blk = (size_t)n * m * es;

                for (int r = 0; r < n; r++)
                        memcpy(res + (size_t)r * m * es,
                               (const unsigned char *)strata__comm_peer(c, 0, r)->send + lo * es,
                               m * es);
                for (int dist = 1; dist < P; dist *= 2) {
                        struct strata__net_msgs x = { .ns = 0 };
                        size_t cnt = (size_t)(dist < P - dist ? dist : P - dist);

                        strata__net_to(&x, (me - dist + P) % P, res, cnt * blk);
                        strata__net_from(&x, (me + dist) % P, res + (size_t)dist * blk, cnt * blk);
                        STRATA_TRY(strata__net_step(c, h, &x));
                        if (x.r[0].data != x.r[0].into)
                                memcpy(x.r[0].into, x.r[0].data, x.r[0].bytes);
                }
                for (int r = 0; r < n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (op->kind == STRATA_COLL_GATHER && c->rank0 + r != op->root)
                                continue;
                        for (int j = 0; j < P; j++)
                                for (int q = 0, p = (me + j) % P; q < n; q++)
                                        memcpy(recv + ((size_t)(p * n + q) * op->count + lo) * es,
                                               res + (size_t)j * blk + (size_t)q * m * es,
                                               m * es);
                }
        }
        return STRATA_OK;
}
