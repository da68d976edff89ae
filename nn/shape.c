/* A module's shape checked: its sizes and parameter groups (nn/shape.h). */
#include <math.h>
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "nn/shape.h"

/*
 * Non-zero unless @p s is a group's name: [a-z0-9_]{1,24}, where a '.' may join two parts
 * (a submodule's parameter as PyTorch names it: out_proj.weight).
 */
static int bad_name(const char *s)
{
        size_t n = 0;

        if (!s || !*s || *s == '.')
                return 1;
        for (; s[n]; n++)
                if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') ||
                      s[n] == '_' || (s[n] == '.' && s[n - 1] != '.' && s[n + 1])))
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
                                                           "be [a-z0-9_]{1,24} (parts joined by "
                                                           "'.'), dtype f32, shape matching "
                                                           "count %zu", i, k,
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

/* Input @p k of @p m (ninputs > 0): its width and layout into @p w. */
static int start_input(const struct strata_model *m, int k, struct strata__shape_walk *w)
{
        const struct strata_model_input *in = &m->inputs[k];
        const struct strata_dims *d = &in->dims;

        if (in->features <= 0)
                return strata__fail(STRATA_EINVAL, "model: input %d has %d features (> 0)", k,
                                    in->features);
        w->in_width[k] = in->features;
        if (d->channels == 0 && d->ndim == 0) {
                w->in_dims[k] = (struct strata_dims){ .channels = in->features };
                return STRATA_OK;
        }
        if (dims_elements(d) != in->features)
                return strata__fail(STRATA_EINVAL, "model: input %d's dims (%d channels, %d "
                                    "spatial dimensions %d x %d x %d) do not hold its %d "
                                    "features", k, d->channels, d->ndim, d->size[0],
                                    d->size[1], d->size[2], in->features);
        w->in_dims[k] = *d;
        return STRATA_OK;
}

/* Several inputs: each checked, their widths adding up to in_features. */
static int start_inputs(const struct strata_model *m, struct strata__shape_walk *w)
{
        long long total = 0;

        if (m->ninputs < 0 || m->ninputs > STRATA_MAX_INPUTS)
                return strata__fail(STRATA_EINVAL, "model: ninputs %d (0..%d)", m->ninputs,
                                    STRATA_MAX_INPUTS);
        if (m->in_dims.channels || m->in_dims.ndim)
                return strata__fail(STRATA_EINVAL, "model: in_dims and inputs both given: with "
                                    "inputs, each input's dims give its layout");
        for (int k = 0; k < m->ninputs; k++) {
                STRATA_TRY(start_input(m, k, w));
                total += m->inputs[k].features;
        }
        if (total != m->in_features)
                return strata__fail(STRATA_EINVAL, "model: its %d inputs hold %lld values a "
                                    "row; in_features is %d", m->ninputs, total,
                                    m->in_features);
        w->ninputs = m->ninputs;
        w->in = w->x_width = w->in_width[0];
        w->dims = w->x_dims = w->in_dims[0];
        return STRATA_OK;
}

int strata__shape_start(const struct strata_model *m, struct strata__shape_walk *w)
{
        const struct strata_dims *d = &m->in_dims;

        if (m->nmodules > STRATA__MODULES_MAX)
                return strata__fail(STRATA_EINVAL, "model has %d modules (1..%d)", m->nmodules,
                                    STRATA__MODULES_MAX);
        memset(w->read, 0, sizeof(w->read));
        if (m->ninputs)
                return start_inputs(m, w);
        w->ninputs = 1;
        w->in = m->in_features;
        w->x_width = m->in_features;
        if (d->channels == 0 && d->ndim == 0) {
                w->dims = (struct strata_dims){ .channels = m->in_features };
                w->x_dims = w->dims;
                w->in_width[0] = w->x_width;
                w->in_dims[0] = w->dims;
                return STRATA_OK;
        }
        if (dims_elements(d) != m->in_features)
                return strata__fail(STRATA_EINVAL, "model: in_dims (%d channels, %d spatial "
                                    "dimensions %d x %d x %d) do not hold in_features %d "
                                    "values", d->channels, d->ndim, d->size[0], d->size[1],
                                    d->size[2], m->in_features);
        w->dims = *d;
        w->x_dims = *d;
        w->in_width[0] = w->x_width;
        w->in_dims[0] = *d;
        return STRATA_OK;
}

/* What module @p i's from names, for a merge module: the model's input or an earlier output. */
static void set_from(const struct strata_model *m, int i, const struct strata__shape_walk *w,
                     struct strata_layer *l)
{
        int from = m->modules[i].from;

        if (from < 0 && from >= -w->ninputs) {
                l->from_width = w->in_width[-1 - from];
                l->from_dims = w->in_dims[-1 - from];
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
        if (m->modules[i].branch) { /* its input is what from names */
                if (l->from_width <= 0)
                        return strata__fail(STRATA_EINVAL, "module %d (%s): branch from=%d is "
                                            "not an earlier module (0..%d) or an input (-1.."
                                            "%d)", i, m->modules[i].ops && m->modules[i].ops->name
                                            ? m->modules[i].ops->name : "?", m->modules[i].from,
                                            i - 1, -w->ninputs);
                l->in = w->in = l->from_width;
                l->in_dims = w->dims = l->from_dims;
        }
        STRATA_TRY(strata__module_shape(l, w->in, s));
        if (s->reads_from && m->modules[i].branch)
                return strata__fail(STRATA_EINVAL, "module %d (%s) is a merge module: it reads "
                                    "from= besides its input, and cannot be a branch", i,
                                    m->modules[i].ops->name);
        if (i > 0 && !m->modules[i].branch)
                w->read[i - 1] = 1;
        if ((s->reads_from || m->modules[i].branch) && m->modules[i].from >= 0)
                w->read[m->modules[i].from] = 1;
        l->out = s->out;
        l->out_dims = s->out_dims;
        w->in = s->out;
        w->dims = s->out_dims;
        w->width[i] = s->out;
        w->outs[i] = s->out_dims;
        return STRATA_OK;
}

/*
 * Output @p k of @p m: its module, loss and weight; its width added to @p total, its targets'
 * values (the width, or one class index for a label loss) to @p tvals.
 */
static int check_output(const struct strata_model *m, const struct strata__shape_walk *w,
                        int k, const unsigned char *seen, long long *total, long long *tvals)
{
        const struct strata_model_output *o = &m->outputs[k];
        const struct strata_loss_ops *loss = o->loss ? o->loss : m->loss;

        if (o->module < 0 || o->module >= m->nmodules)
                return strata__fail(STRATA_EINVAL, "model output %d: module %d is not one of "
                                    "its modules (0..%d)", k, o->module, m->nmodules - 1);
        if (seen[o->module])
                return strata__fail(STRATA_EINVAL, "model output %d: module %d is an output "
                                    "already", k, o->module);
        if (!isfinite(o->weight) || o->weight < 0.0f)
                return strata__fail(STRATA_EINVAL, "model output %d (module %d): weight %g: "
                                    "finite, >= 0 (0: 1.0)", k, o->module, (double)o->weight);
        if (loss && (!loss->check || !loss->forward))
                return strata__fail(STRATA_EINVAL, "model output %d (module %d): loss %s "
                                    "lacks check or forward", k, o->module,
                                    loss->name ? loss->name : "(unnamed)");
        if ((!loss || !loss->float_targets) && w->width[o->module] < 2)
                return strata__fail(STRATA_EINVAL, "model output %d (module %d): loss %s "
                                    "takes class labels: its module gives %d value a row, "
                                    "classes need >= 2", k, o->module,
                                    loss ? (loss->name ? loss->name : "(unnamed)")
                                         : "softmax_cross_entropy (the default)",
                                    w->width[o->module]);
        *total += w->width[o->module];
        *tvals += loss && loss->float_targets ? w->width[o->module] : 1;
        return STRATA_OK;
}

int strata__shape_finish(const struct strata_model *m, const struct strata__shape_walk *w,
                         int *outputs, int *targets)
{
        unsigned char seen[STRATA__MODULES_MAX] = { 0 };
        long long total = 0, tvals = 0;
        int n = m->nmodules;

        if (m->noutputs < 0 || m->noutputs > STRATA_MAX_OUTPUTS)
                return strata__fail(STRATA_EINVAL, "model: noutputs %d (0..%d)", m->noutputs,
                                    STRATA_MAX_OUTPUTS);
        for (int k = 0; k < m->noutputs; k++) {
                STRATA_TRY(check_output(m, w, k, seen, &total, &tvals));
                seen[m->outputs[k].module] = 1;
        }
        if (m->noutputs && !seen[n - 1])
                return strata__fail(STRATA_EINVAL, "model: the last module (%d, %s) is not "
                                    "one of its outputs: nothing would read it", n - 1,
                                    m->modules[n - 1].ops->name);
        for (int i = 0; i < n - 1; i++)
                if (!w->read[i] && !seen[i])
                        return strata__fail(STRATA_EINVAL, "model: module %d (%s)'s output is "
                                            "read by no module and is no output (a branch "
                                            "after it starts elsewhere)", i,
                                            m->modules[i].ops->name);
        if (total > (1 << 30))
                return strata__fail(STRATA_EINVAL, "model: its outputs hold %lld values a row",
                                    total);
        if (outputs)
                *outputs = m->noutputs ? (int)total : w->width[n - 1];
        if (targets) /* one output: its loss's targets, as the model without outputs */
                *targets = m->noutputs > 1 ? (int)tvals
                                           : m->noutputs ? (int)total : w->width[n - 1];
        return STRATA_OK;
}
