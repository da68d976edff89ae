/*
 * The walk over a replica's parameter and buffer groups (strata_parameter(), checkpoints,
 * the precision plugins): every group by its stable name with its gradient, optimizer-state
 * slots and the part of it the device's shard holds.
 */
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "nn/replica_private.h"

int strata__replica_nparams(const struct strata__replica *r)
{
        int n = 0;

        for (int i = 0; i < r->v.nlayers; i++)
                n += r->v.layers[i].ngroups;
        return n;
}

/* Group @p g's trained values at @p poff, with its shard and optimizer slots, into @p out. */
static void trained_group(const struct strata__replica *r, const struct strata_param_group *g,
                          size_t poff, struct strata_param *out)
{
        const struct strata__shard *s = r->v.shard;
        size_t at = strata__shard_part(s, poff, g->count, &out->shard_lo, &out->shard_hi);
        size_t len = strata__shard_len(s);
        int slots = len ? (int)(r->v.nopt / len) : 0, in = out->shard_hi > out->shard_lo;
        /* own_params: the shard's part, as the optimizer state */
        size_t v = !strata__shard_own_params(s) ? poff : in ? at : 0;
        size_t gv = !strata__shard_own_grads(s) ? v : in ? at : 0;

        out->value = r->v.params + v;
        out->grad = r->v.grads ? r->v.grads + gv : NULL; /* NULL: inference only */
        out->opt_slots = slots;
        for (int j = 0; j < slots && in; j++)
                out->opt_state[j] = r->v.opt_state + len * (size_t)j + at;
}

int strata__replica_param(const struct strata__replica *r, int index, struct strata_param *out)
{
        size_t poff = 0, soff = 0;

        for (int i = 0; i < r->v.nlayers; i++) {
                const struct strata_layer *l = &r->v.layers[i];
                size_t lsoff = 0; /* a layer's running state is its own vector */

                for (int k = 0; k < l->ngroups; k++) {
                        const struct strata_param_group *g = &l->groups[k];
                        int running = g->role == STRATA_ROLE_RUNNING;

                        if (index-- == 0) {
                                memset(out, 0, sizeof(*out));
                                snprintf(out->name, sizeof(out->name), "layers.%d.%s", i,
                                         g->name);
                                out->layer = i;
                                out->group = *g;
                                out->offset = running ? soff : poff;
                                out->shard_hi = g->count;
                                if (running) {
                                        out->value = l->state + lsoff;
                                        return STRATA_OK;
                                }
                                trained_group(r, g, poff, out);
                                return STRATA_OK;
                        }
                        if (running) {
                                soff += g->count;
                                lsoff += g->count;
                        } else {
                                poff += g->count;
                        }
                }
        }
        return -1;
}
