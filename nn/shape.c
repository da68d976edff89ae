/* A module's shape checked: its sizes and parameter groups (nn/shape.h). */
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "nn/shape.h"

/* Non-zero unless @p s is a group's name: [a-z0-9_]{1,24}. */
static int bad_name(const char *s)
{
        size_t n = 0;

        if (!s || !*s)
                return 1;
        for (; s[n]; n++)
                if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
                        return 1;
        return n > 24;
}

/*
 * Check module @p i's parameter groups against its sizes, or give it the default ones
 * ("param" and "state") when it declares none.
 */
static int check_groups(struct strata_module_shape *s, int i)
{
        size_t trained = 0, running = 0;

        if (s->ngroups == 0) {
                if (s->params)
                        s->groups[s->ngroups++] = (struct strata_param_group){
                                "param", STRATA_F32, s->params, STRATA_ROLE_WEIGHT, 1,
                                { s->params, 1 } };
                if (s->state)
                        s->groups[s->ngroups++] = (struct strata_param_group){
                                "state", STRATA_F32, s->state, STRATA_ROLE_RUNNING, 1,
                                { s->state, 1 } };
                return STRATA_OK;
        }
        if (s->ngroups < 0 || s->ngroups > STRATA_MAX_GROUPS)
                return strata__fail(STRATA_EINVAL, "module %d declares %d parameter groups "
                                                   "(0..%d)", i, s->ngroups, STRATA_MAX_GROUPS);
        for (int k = 0; k < s->ngroups; k++) {
                const struct strata_param_group *g = &s->groups[k];

                if (bad_name(g->name) || g->dtype != STRATA_F32 ||
                    (unsigned)g->role >= STRATA_ROLE_COUNT || g->ndim < 1 || g->ndim > 2 ||
                    g->shape[0] * (g->ndim == 2 ? g->shape[1] : 1) != g->count)
                        return strata__fail(STRATA_EINVAL, "module %d, group %d (%s): name must "
                                                           "be [a-z0-9_]{1,24}, dtype f32, "
                                                           "shape matching count %zu", i, k,
                                            g->name ? g->name : "NULL", g->count);
                if (g->role == STRATA_ROLE_RUNNING)
                        running += g->count;
                else
                        trained += g->count;
        }
        if (trained != s->params || running != s->state)
                return strata__fail(STRATA_EINVAL, "module %d: groups hold %zu trained and %zu "
                                                   "running values; it declares %zu and %zu",
                                    i, trained, running, s->params, s->state);
        return STRATA_OK;
}

int strata__module_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_module_ops *ops = l->desc->ops;

        if (!ops || !ops->shape || !ops->forward || !ops->backward)
                return strata__fail(STRATA_EINVAL, "module %d has no complete ops table",
                                    l->index);
        memset(s, 0, sizeof(*s));
        STRATA_TRY(ops->shape(l, in, s));
        if (s->out <= 0)
                return strata__fail(STRATA_EINVAL, "module %d declares width %d", l->index,
                                    s->out);
        return check_groups(s, l->index);
}
