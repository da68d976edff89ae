/*
 * The net transport's primitive (drivers/net/link.h): one step over the link, with the
 * call's header checked against the step count, and the direct exchange, one step with every
 * other process whose headers each process checks, so that all reach the same verdict. Every
 * schedule of the transport is made of these steps.
 */
#include <stddef.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "drivers/net/link.h"

/* One step of this call with header @p h (its seq the step's number); counts what it sent. */
int strata__net_step(struct strata_comm *c, struct strata__net_head *h, struct strata__net_msgs *x)
{
        _Alignas(64) unsigned char head[STRATA__NET_HEAD] = { 0 };
        struct strata__net_state *s = strata__net_st(c);
        uint64_t seq;
        int rc;

        h->seq = ++s->seq;
        memcpy(head, h, sizeof(*h)); /* the link sends STRATA__NET_HEAD bytes */
        /* above the step count, this process's flags (decision 0108) */
        seq = h->seq | (uint64_t)atomic_load_explicit(&s->carry, memory_order_relaxed)
                               << STRATA__NET_SEQ_BITS;
        memcpy(head + offsetof(struct strata__net_head, seq), &seq, sizeof(seq));
        rc = s->net->ops->step(s->net, head, x->s, x->ns, x->r, x->nr, s->link,
                               c->group.timeout_s);
        s->msgs += (uint64_t)x->ns;
        for (int i = 0; i < x->ns; i++)
                s->bytes += x->s[i].bytes;
        if (rc != STRATA_OK)
                return rc;
        for (int i = 0; i < x->nr; i++) {
                struct strata__net_head o;

                memcpy(&o, x->r[i].head, sizeof(o));
                if ((o.seq & STRATA__NET_SEQ_MASK) != h->seq)
                        return strata__fail(STRATA_EFORMAT, "net: process %d is at step %llu, "
                                            "this one at %llu", x->r[i].peer,
                                            (unsigned long long)(o.seq & STRATA__NET_SEQ_MASK),
                                            (unsigned long long)h->seq);
        }
        return STRATA_OK;
}

/* Whether header @p o, from process @p p, agrees with this call's @p h. */
int strata__net_agrees(const struct strata__net_head *h, const struct strata__net_head *o)
{
        return o->kind == h->kind && o->count == h->count && o->dtype == h->dtype &&
               o->op == h->op && o->root == h->root && o->ranks == h->ranks &&
               o->lo == h->lo && o->block == h->block;
}

/*
 * One direct step of this call: header @p h, and out[p] (len[p] bytes) to each other process
 * p; in[p] then points at what process p sent this one. Checks every header: every process
 * sees every other's, so all reach the same verdict.
 */
int strata__net_exchange_to(struct strata_comm *c, struct strata__net_head *h,
                            const void *const *out, const size_t *len, const unsigned char **in)
{
        struct strata_net *net = strata__net_st(c)->net;
        struct strata__net_msgs x = { .ns = 0 };

        for (int p = 0, j = 0; p < net->size; p++) {
                if (p == net->rank)
                        continue;
                strata__net_to(&x, p, out[p], len[p]);
                strata__net_from(&x, p, strata__net_st(c)->in + (size_t)j++ * STRATA__NET_DATA,
                                 STRATA__NET_DATA);
        }
        STRATA_TRY(strata__net_step(c, h, &x));
        for (int i = 0; i < x.nr; i++) {
                int p = x.r[i].peer;
                struct strata__net_head o;

                in[p] = x.r[i].data;
                memcpy(&o, x.r[i].head, sizeof(o));
                strata__net_st(c)->carry_in |= (uint32_t)(o.seq >> STRATA__NET_SEQ_BITS);
                if (o.status != STRATA_OK && h->status == STRATA_OK)
                        return strata__fail(STRATA_EINVAL, "process %d passed bad arguments", p);
                if (h->status != STRATA_OK)
                        continue;
                if (!strata__net_agrees(h, &o))
                        return strata__fail(STRATA_EINVAL, "processes %d and %d disagree on the "
                                            "collective", net->rank, p);
        }
        /* every process's flags reached every other (decision 0108) */
        atomic_fetch_add_explicit(&strata__net_st(c)->carried, 1, memory_order_relaxed);
        return h->status;
}

/* The same @p bytes of @p mine to every process; in[rank] is @p mine. */
int strata__net_exchange(struct strata_comm *c, struct strata__net_head *h, const void *mine,
                         size_t bytes, const unsigned char **in)
{
        const void *out[STRATA__NET_DIRECT];
        size_t len[STRATA__NET_DIRECT];

        for (int p = 0; p < strata__net_st(c)->net->size; p++) {
                out[p] = mine;
                len[p] = bytes;
        }
        in[strata__net_st(c)->net->rank] = mine;
        return strata__net_exchange_to(c, h, out, len, in);
}
