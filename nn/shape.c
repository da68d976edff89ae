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

/* The product of a group's extents (0 when one is 0 or it overflows). */
static size_t extent_product(const struct strata_param_group *g)
{
        size_t n = 1;

        for (int d = 0; d < g->ndim && d < STRATA_MAX_PARAM_DIMS; d++)
                if (strata__mul_size(n, g->shape[d], &n))
                        return 0;
        return n;
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
                    (unsigned)g->role >= STRATA_ROLE_COUNT || g->ndim < 1 ||
                    g->ndim > STRATA_MAX_PARAM_DIMS || extent_product(g) != g->count)
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

/* Elements of layout @p d, or -1 when it is not a layout (bad counts, extents, overflow). */
static long long dims_elements(const struct strata_dims *d)
{
        long long n = d->channels;

        if (d->channels <= 0 || d->ndim < 0 || d->ndim > STRATA_MAX_SPATIAL)
                return -1;
        for (int i = 0; i < STRATA_MAX_SPATIAL; i++) {
                if (i < d->ndim && (d->size[i] <= 0 || n * d->size[i] > (1LL << 40)))
                        return -1;
                if (i >= d->ndim && d->size[i] != 0)
                        return -1;
                if (i < d->ndim)
                        n *= d->size[i];
        }
        return n;
}

/* A module's output layout: given and matching its width, or the default (nn.h). */
static int check_out_dims(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        struct strata_dims *o = &s->out_dims;

        if (o->channels == 0 && o->ndim == 0) {
                if (s->out == in)
                        *o = l->in_dims;
                else
                        *o = (struct strata_dims){ .channels = s->out };
                return STRATA_OK;
        }
        if (dims_elements(o) != s->out)
                return strata__fail(STRATA_EINVAL, "module %d (%s) declares an output of %d "
                                    "channels over %d dimensions that is not its width %d",
                                    l->index, l->desc->ops->name, o->channels, o->ndim, s->out);
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
        if (s->reads_from && l->from_width <= 0) /* an application's merge module too */
                return strata__fail(STRATA_EINVAL, "module %d (%s) reads an earlier output: "
                                    "from=%d is not an earlier module (-1: the model's input, "
                                    "else 0..%d)", l->index, ops->name ? ops->name : "?",
                                    l->desc->from, l->index - 1);
        if (s->out <= 0)
                return strata__fail(STRATA_EINVAL, "module %d declares width %d", l->index,
                                    s->out);
        STRATA_TRY(check_out_dims(l, in, s));
        return check_groups(s, l->index);
}

int strata__shape_start(const struct strata_model *m, struct strata__shape_walk *w)
{
        const struct strata_dims *d = &m->in_dims;

        if (m->nmodules > STRATA__MODULES_MAX)
                return strata__fail(STRATA_EINVAL, "model has %d modules (1..%d)", m->nmodules,
                                    STRATA__MODULES_MAX);
        w->in = m->in_features;
        w->x_width = m->in_features;
        if (d->channels == 0 && d->ndim == 0) {
                w->dims = (struct strata_dims){ .channels = m->in_features };
                w->x_dims = w->dims;
                return STRATA_OK;
        }
        if (dims_elements(d) != m->in_features)
                return strata__fail(STRATA_EINVAL, "model: in_dims (%d channels, %d spatial "
                                    "dimensions %d x %d x %d) do not hold in_features %d "
                                    "values", d->channels, d->ndim, d->size[0], d->size[1],
                                    d->size[2], m->in_features);
        w->dims = *d;
        w->x_dims = *d;
        return STRATA_OK;
}

/* What module @p i's from names, for a merge module: the model's input or an earlier output. */
static void set_from(const struct strata_model *m, int i, const struct strata__shape_walk *w,
                     struct strata_layer *l)
{
        int from = m->modules[i].from;

        if (from == -1) {
                l->from_width = w->x_width;
                l->from_dims = w->x_dims;
                l->from_name = "input";
        } else if (from >= 0 && from < i) {
                l->from_width = w->width[from];
                l->from_dims = w->outs[from];
                l->from_name = m->modules[from].ops && m->modules[from].ops->name
                                       ? m->modules[from].ops->name : "?";
        }
}

int strata__shape_step(const struct strata_model *m, int i, struct strata__shape_walk *w,
                       struct strata_layer *l, struct strata_module_shape *s)
{
        *l = (struct strata_layer){ .desc = &m->modules[i], .index = i, .in = w->in,
                                    .in_dims = w->dims };
        if (i >= STRATA__MODULES_MAX)
                return strata__fail(STRATA_EINVAL, "model: module %d past the most (%d)", i,
                                    STRATA__MODULES_MAX);
        set_from(m, i, w, l);
        STRATA_TRY(strata__module_shape(l, w->in, s));
        l->out = s->out;
        l->out_dims = s->out_dims;
        w->in = s->out;
        w->dims = s->out_dims;
        w->width[i] = s->out;
        w->outs[i] = s->out_dims;
        return STRATA_OK;
}
