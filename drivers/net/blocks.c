/*
 * The net transport's collectives over blocks (drivers/comm_internal.h; docs/decisions/0045):
 * the reduce-scatter and the all-gather of a span that several ranks' blocks share. Direct,
 * for 2 to 4 processes: one exchange per round, each process sending every other only that
 * process's region. From 5 processes, after the butterfly: recursive halving whose segments
 * are the owners' pieces (or a balanced round when one owner holds most of it), and Bruck's
 * dissemination of the processes' regions.
 */
#include <string.h>

#include "strata/status.h"
#include "arch/reduce.h"
#include "drivers/net/link.h"

/* ---- Common to both ---- */

/* A call over blocks: its geometry, and this process's view of the span. */
struct span {
        const struct strata__blocks *geo;
        size_t count, es;
};

static struct span span_of(const struct strata_comm *c, const struct strata_coll *op)
{
        return (struct span){ strata__comm_blocks(c, 0, 0), op->count,
                              strata_dtype_size(op->dtype) };
}

/* [*a, *e) narrowed to [x, y) (empty, *a == *e, when they miss). */
static void clip(size_t x, size_t y, size_t *a, size_t *e)
{
        *a = *a > x ? *a : x;
        *e = *e < y ? *e : y;
        if (*a > *e)
                *a = *e;
}

/* Global rank @p g's piece of the span, whole (*pa: where it starts) and within [x, y). */
static void piece_in(const struct span *sp, int g, size_t x, size_t y, size_t *pa, size_t *a,
                     size_t *e)
{
        strata__blocks_piece(sp->geo, sp->count, g, pa, e);
        *a = *pa;
        clip(x, y, a, e);
}

/* Process @p q's region (its ranks' pieces, one after the other) within [x, y). */
static void region(const struct strata_comm *c, const struct span *sp, int q, size_t x,
                   size_t y, size_t *a, size_t *e)
{
        size_t t;

        strata__blocks_piece(sp->geo, sp->count, q * c->n, a, &t);
        strata__blocks_piece(sp->geo, sp->count, q * c->n + c->n - 1, &t, e);
        clip(x, y, a, e);
}

/* Local rank @p r's buffers, indexed by span element (a piece's buffer moved back by its start). */
static unsigned char *recv_at(const struct strata_comm *c, const struct span *sp, int r)
{
        const struct strata_coll *o = strata__comm_peer(c, 0, r);
        size_t pa, e;

        if (o->kind == (enum strata_coll_kind)STRATA__COLL_AG_BLOCKS || !o->recv)
                return o->recv; /* NULL: an empty piece, never written */
        strata__blocks_piece(sp->geo, sp->count, c->rank0 + r, &pa, &e);
        return (unsigned char *)o->recv - pa * sp->es;
}

static const unsigned char *send_at(const struct strata_comm *c, const struct span *sp, int r)
{
        const struct strata_coll *o = strata__comm_peer(c, 0, r);
        size_t pa, e;

        if (o->kind == (enum strata_coll_kind)STRATA__COLL_RS_BLOCKS || !o->send)
                return o->send; /* NULL: an empty piece, never read */
        strata__blocks_piece(sp->geo, sp->count, c->rank0 + r, &pa, &e);
        return (const unsigned char *)o->send - pa * sp->es;
}

/* ---- Direct, 2 to 4 processes ---- */

/*
 * Direct reduce-scatter over blocks, per round [x, y) of the span: each process sends every
 * other its local ranks' elements of that process's region, and sums its own ranks' pieces
 * from every rank in global rank order (the world's order): (P-1)/P of the data each way.
 */
int strata__net_rsb_direct(struct strata_comm *c, const struct strata_coll *op,
                           struct strata__net_head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = strata__net_per_round(c, es), a[STRATA__NET_DIRECT],
               e[STRATA__NET_DIRECT], len[STRATA__NET_DIRECT];
        int n = c->n, P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank;
        int o = strata__comm_world_op(op->op, op->dtype, c->world);
        const void *out[STRATA__NET_DIRECT], *src[STRATA_MAX_DEVICES * STRATA__NET_DIRECT];
        const unsigned char *in[STRATA__NET_DIRECT];
        unsigned char *pack = strata__net_st(c)->pack;

        for (size_t x = 0;; x += per) {
                size_t y = op->count - x < per ? op->count : x + per;

                for (int q = 0; q < P; q++) {
                        size_t m;

                        region(c, &sp, q, x, y, &a[q], &e[q]);
                        m = e[q] - a[q];
                        len[q] = q == me ? 0 : m * es * (size_t)n;
                        out[q] = n == 1 ? send_at(c, &sp, 0) + a[q] * es
                                        : pack + (a[q] - x) * es * (size_t)n;
                        for (int r = 0; n > 1 && q != me && r < n; r++)
                                memcpy(pack + ((a[q] - x) * (size_t)n + (size_t)r * m) * es,
                                       send_at(c, &sp, r) + a[q] * es, m * es);
                }
                in[me] = NULL;
                STRATA_TRY(strata__net_exchange_to(c, h, out, len, in));
                for (int r = 0; r < n; r++) {
                        size_t pa, ra, re, m = e[me] - a[me];
                        void *dst[1];

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (ra == re)
                                continue;
                        dst[0] = recv_at(c, &sp, r) + ra * es;
                        for (int p = 0; p < P; p++)
                                for (int q = 0; q < n; q++)
                                        src[p * n + q] = p == me
                                                ? send_at(c, &sp, q) + ra * es
                                                : in[p] + ((size_t)q * m + ra - a[me]) * es;
                        strata__reduce_many(op->dtype, o, dst, 1, src, P * n, 0, re - ra, 0);
                }
                if (y >= op->count)
                        return STRATA_OK;
        }
}

/* Direct all-gather over blocks, per round: this process's region to every process. */
int strata__net_agb_direct(struct strata_comm *c, const struct strata_coll *op,
                           struct strata__net_head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = STRATA__NET_DATA / es;
        int n = c->n, P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank;
        const unsigned char *data[STRATA__NET_DIRECT];
        unsigned char *pack = strata__net_st(c)->pack;

        for (size_t x = 0;; x += per) {
                size_t y = op->count - x < per ? op->count : x + per, ma, me_e;
                const void *mine;

                region(c, &sp, me, x, y, &ma, &me_e);
                mine = me_e > ma ? send_at(c, &sp, 0) + ma * es : NULL;
                for (int r = 0; n > 1 && r < n; r++) {
                        size_t pa, ra, re;

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (re > ra)
                                memcpy(pack + (ra - ma) * es, send_at(c, &sp, r) + ra * es,
                                       (re - ra) * es);
                        mine = pack;
                }
                STRATA_TRY(strata__net_exchange(c, h, mine, (me_e - ma) * es, data));
                for (int r = 0; r < n; r++)
                        for (int p = 0; p < P; p++) {
                                size_t pa, pe;

                                region(c, &sp, p, x, y, &pa, &pe);
                                if (pe > pa)
                                        memmove(recv_at(c, &sp, r) + pa * es, data[p],
                                                (pe - pa) * es);
                        }
                if (y >= op->count)
                        return STRATA_OK;
        }
}

/* ---- Over the butterfly, from 5 processes (strata__net_butterfly agreed first) ---- */

/*
 * A reduce-scatter over blocks as recursive halving whose segments are the owners' pieces:
 * each round's span, after the pairs fold, is laid out with virtual rank u's pieces at
 * position bitrev(u) (u's global ranks' pieces, a pair's two), so the ranks that keep a
 * half after step j (those equal to v in bits 0..j) hold one contiguous run of positions and
 * the halves are the pieces they own. Each element is combined as halving combines it (lower +
 * upper, distance 1 first), so its bits are the world's order whatever the cut; virtual rank
 * v ends with its own pieces alone: about (p-1)/p of the data each way, k (+2) steps a round.
 */
static int bitrev(int v, int k)
{
        int x = 0;

        for (int i = 0; i < k; i++)
                x |= (v >> i & 1) << (k - 1 - i);
        return x;
}

/* Virtual rank @p u's elements of round [x, y), relative to x: its global ranks' pieces. */
static void vpiece(const struct strata__net_world *w, const struct span *sp, size_t x, size_t y,
                   int u, size_t *a, size_t *e)
{
        int g = strata__net_grank(w, u);
        size_t t;

        strata__blocks_piece(sp->geo, sp->count, g, a, &t);
        strata__blocks_piece(sp->geo, sp->count, u < w->r ? g + 1 : g, &t, e);
        clip(x, y, a, e);
        *a -= x;
        *e -= x;
}

/* In the permuted round: the elements of the virtual ranks equal to @p v in bits 0..j-1. */
static void vsegment(const struct strata__net_world *w, const struct span *sp, size_t x, size_t y,
                     int v, int j, size_t *a, size_t *e)
{
        int start = bitrev(v & ((1 << j) - 1), j) << (w->k - j), end = start + (1 << (w->k - j));

        *a = *e = 0;
        for (int p = 0; p < end; p++) {
                size_t ua, ue;

                vpiece(w, sp, x, y, bitrev(p, w->k), &ua, &ue);
                if (p < start)
                        *a += ue - ua;
                *e += ue - ua;
        }
}

/* rsb's halving steps: as halving(), the segments the owners' pieces (vsegment). */
static int rsb_halving(struct strata_comm *c, struct strata__net_head *h,
                       const struct strata__net_world *w, const struct span *sp,
                       struct strata__net_red *d, size_t x, size_t y)
{
        struct strata__net_state *s = strata__net_st(c);
        size_t es = sp->es;

        for (int j = 0; j < w->k; j++) {
                struct strata__net_msgs xs = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES], dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l);
                        size_t a, b;

                        if (v < 0)
                                continue;
                        vsegment(w, sp, x, y, v ^ dist, j + 1, &a, &b); /* the partner's */
                        strata__net_swap(&xs, w, s, l, strata__net_grank(w, v ^ dist),
                                         d->cur[l] + a * es, (b - a) * es, rix);
                }
                STRATA_TRY(strata__net_step(c, h, &xs));
                for (int l = 0; l < w->n; l++) {
                        int v = strata__net_vrank(w, w->g0 + l), gu;
                        unsigned char *acc = s->acc + (size_t)l * w->lane;
                        const unsigned char *other;
                        size_t a, b;

                        if (v < 0)
                                continue;
                        gu = strata__net_grank(w, v ^ dist);
                        vsegment(w, sp, x, y, v, j + 1, &a, &b);
                        other = strata__net_is_local(w, gu)
                                        ? d->cur[gu - w->g0]
                                        : (const unsigned char *)xs.r[rix[l]].data - a * es;
                        strata__net_combine(d, &acc, 1, v & dist ? other : d->cur[l],
                                            v & dist ? d->cur[l] : other, a, b);
                }
                for (int l = 0; l < w->n; l++)
                        if (strata__net_vrank(w, w->g0 + l) >= 0)
                                d->cur[l] = s->acc + (size_t)l * w->lane;
        }
        return STRATA_OK;
}

/* Each virtual rank's sum into its ranks' receive buffers; the odd rank of a pair in another
 * process gets its piece in one step (taken by every process when there are pairs). */
static int rsb_deliver(struct strata_comm *c, struct strata__net_head *h,
                       const struct strata__net_world *w, const struct span *sp,
                       const struct strata_coll *op, size_t x, size_t y)
{
        struct strata__net_state *s = strata__net_st(c);
        struct strata__net_msgs xs = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES];
        size_t es = sp->es, pa, ra, re, a2, ra2, re2;

        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l, v = strata__net_vrank(w, g);
                const unsigned char *sum;
                size_t A, B;

                rix[l] = -1;
                if (v < 0) {
                        if (!strata__net_is_local(w, g - 1)) {
                                rix[l] = xs.nr;
                                strata__net_from(&xs, (g - 1) / w->n, s->in + (size_t)l * w->lane,
                                                 w->lane);
                        }
                        continue;
                }
                vsegment(w, sp, x, y, v, w->k, &A, &B);
                sum = s->acc + (size_t)l * w->lane + A * es;
                piece_in(sp, g, x, y, &pa, &ra, &re);
                if (re > ra)
                        strata__net_deliver(op, c->world, recv_at(c, sp, l) + ra * es, sum,
                                            re - ra);
                if (g >= 2 * w->r)
                        continue;
                piece_in(sp, g + 1, x, y, &a2, &ra2, &re2);
                if (strata__net_is_local(w, g + 1) && re2 > ra2)
                        strata__net_deliver(op, c->world, recv_at(c, sp, l + 1) + ra2 * es,
                                            sum + (re - ra) * es, re2 - ra2);
                else if (!strata__net_is_local(w, g + 1))
                        strata__net_to(&xs, (g + 1) / w->n, sum + (re - ra) * es, (re2 - ra2) * es);
        }
        if (w->r)
                STRATA_TRY(strata__net_step(c, h, &xs));
        for (int l = 0; l < w->n; l++) {
                if (rix[l] < 0)
                        continue;
                piece_in(sp, w->g0 + l, x, y, &pa, &ra, &re);
                if (re > ra)
                        strata__net_deliver(op, c->world, recv_at(c, sp, l) + ra * es,
                                            xs.r[rix[l]].data, re - ra);
        }
        return STRATA_OK;
}

/*
 * Bytes on the critical path of a round's halving over the pieces (the largest segment any
 * rank keeps, step by step, and an odd rank's piece sent after): where one owner's piece holds
 * most of a round, every step moves nearly all of it (log2 P times the round), and a balanced
 * halving and doubling (2 x the round, then each owner keeps its part) moves less.
 */
static size_t rsb_cost(const struct strata__net_world *w, const struct span *sp, size_t x, size_t y)
{
        size_t cost = 0, odd = 0, a, e;

        for (int j = 0; j < w->k; j++) {
                size_t kept = 0;

                for (int cl = 0; cl < 2 << j; cl++) {
                        size_t seg = 0;

                        for (int u = cl; u < w->q; u += 2 << j) {
                                vpiece(w, sp, x, y, u, &a, &e);
                                seg += e - a;
                        }
                        kept = seg > kept ? seg : kept;
                }
                cost += kept;
        }
        for (int u = 0; u < w->r; u++) { /* the unfold step: the largest odd piece */
                size_t pa;

                piece_in(sp, 2 * u + 1, x, y, &pa, &a, &e);
                odd = e - a > odd ? e - a : odd;
        }
        return cost + odd;
}

/* A round as a balanced all-reduce (tree_round), each local rank keeping its piece. */
static int rsb_whole(struct strata_comm *c, const struct strata_coll *op,
                     struct strata__net_head *h, const struct span *sp, struct strata__net_red *d,
                     size_t x, size_t y)
{
        const unsigned char *sum;

        STRATA_TRY(strata__net_tree_round(c, h, d, &sum));
        for (int l = 0; l < c->n; l++) {
                size_t pa, ra, re;

                piece_in(sp, c->rank0 + l, x, y, &pa, &ra, &re);
                if (re > ra)
                        strata__net_deliver(op, c->world, recv_at(c, sp, l) + ra * sp->es,
                                            sum + (ra - x) * sp->es, re - ra);
        }
        return STRATA_OK;
}

int strata__net_tree_rs_blocks(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h)
{
        struct strata__net_world w = strata__net_world_of(c);
        struct strata__net_state *s = strata__net_st(c);
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = w.lane / es;
        struct strata__net_red d;

        strata__net_red_init(&d, c, op);
        for (size_t x = 0; x < op->count; x += per) {
                size_t y = op->count - x < per ? op->count : x + per;

                d.m = y - x;
                for (int l = 0; l < w.n; l++)
                        d.src[l] = send_at(c, &sp, l) + x * es;
                if (rsb_cost(&w, &sp, x, y) > 2 * d.m) {
                        STRATA_TRY(rsb_whole(c, op, h, &sp, &d, x, y));
                        continue;
                }
                STRATA_TRY(strata__net_pre_step(c, h, &w, &d));
                for (int l = 0; l < w.n; l++) { /* positions bitrev(u) */
                        unsigned char *lane = s->res + (size_t)l * w.lane;
                        size_t off = 0;

                        if (strata__net_vrank(&w, w.g0 + l) < 0)
                                continue;
                        for (int p = 0; p < w.q; p++) {
                                size_t ua, ue;

                                vpiece(&w, &sp, x, y, bitrev(p, w.k), &ua, &ue);
                                memcpy(lane + off * es, d.cur[l] + ua * es, (ue - ua) * es);
                                off += ue - ua;
                        }
                        d.cur[l] = lane;
                }
                STRATA_TRY(rsb_halving(c, h, &w, &sp, &d, x, y));
                STRATA_TRY(rsb_deliver(c, h, &w, &sp, op, x, y));
        }
        return STRATA_OK;
}

/* Elements of the regions of processes me, me + 1, ..., me + j - 1 within [x, y). */
static size_t rot_off(const struct strata_comm *c, const struct span *sp, size_t x, size_t y,
                      int j)
{
        int P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank;
        size_t off = 0, a, e;

        for (int i = 0; i < j; i++) {
                region(c, sp, (me + i) % P, x, y, &a, &e);
                off += e - a;
        }
        return off;
}

/*
 * An all-gather over blocks: Bruck's dissemination of the processes' regions, a round of the
 * span at a time, kept rotated in res (position j: process me + j) so each step sends one
 * contiguous run; ceil(log2 P) steps a round, each process receiving the span once.
 */
int strata__net_tree_ag_blocks(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = STRATA__NET_DATA / es;
        int P = strata__net_st(c)->net->size, me = strata__net_st(c)->net->rank, n = c->n;
        unsigned char *res = strata__net_st(c)->res;

        for (size_t x = 0; x < op->count; x += per) {
                size_t y = op->count - x < per ? op->count : x + per, ma, mend, off = 0;

                region(c, &sp, me, x, y, &ma, &mend);
                for (int r = 0; r < n; r++) {
                        size_t pa, ra, re;

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (re > ra)
                                memcpy(res + (ra - ma) * es, send_at(c, &sp, r) + ra * es,
                                       (re - ra) * es);
                }
                for (int dist = 1; dist < P; dist *= 2) {
                        struct strata__net_msgs xs = { .ns = 0 };
                        int cnt = dist < P - dist ? dist : P - dist;
                        size_t at = rot_off(c, &sp, x, y, dist);

                        strata__net_to(&xs, (me - dist + P) % P, res,
                                       rot_off(c, &sp, x, y, cnt) * es);
                        strata__net_from(&xs, (me + dist) % P, res + at * es,
                                         (rot_off(c, &sp, x, y, dist + cnt) - at) * es);
                        STRATA_TRY(strata__net_step(c, h, &xs));
                        if (xs.r[0].data != xs.r[0].into)
                                memcpy(xs.r[0].into, xs.r[0].data, xs.r[0].bytes);
                }
                for (int j = 0; j < P; j++) {
                        size_t pa, pe;

                        region(c, &sp, (me + j) % P, x, y, &pa, &pe);
                        for (int r = 0; r < n && pe > pa; r++)
                                memmove(recv_at(c, &sp, r) + pa * es, res + off * es,
                                        (pe - pa) * es);
                        off += pe - pa;
                }
        }
        return STRATA_OK;
}
