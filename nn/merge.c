/*
 * Merge modules: skip connections. Add and Concat read, besides their input x (the previous
 * module's output), the output of the earlier module their strata_module from names (-1: the
 * model's input), which the runtime hands them as l->skip; their backward writes that output's
 * gradient to l->dskip (or adds onto it, l->dskip_add), and the replica sums it into the
 * gradient of that output before the module that gave it runs its backward. No parameters, no
 * saved values: rows are independent (invariant mode runs them per chunk), and every value is
 * f32 (no bf16_io). Arithmetic goes through the kernels: copy and add.
 */
#include <stdio.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"

/* Layout @p d as PyTorch prints a sample's shape, "(16, 8, 8)", into @p buf. */
static const char *dims_text(const struct strata_dims *d, char *buf, size_t n)
{
        int at = snprintf(buf, n, "(%d", d->channels);

        for (int i = 0; i < d->ndim && i < STRATA_MAX_SPATIAL && at > 0 && (size_t)at < n; i++)
                at += snprintf(buf + at, n - (size_t)at, ", %d", d->size[i]);
        if (at > 0 && (size_t)at < n)
                snprintf(buf + at, n - (size_t)at, ")");
        return buf;
}

/* The module's from names the model's input or an earlier module (l->from_width set). */
static int from_check(const struct strata_layer *l)
{
        if (l->from_width > 0)
                return STRATA_OK;
        if (l->index == 0)
                return strata__fail(STRATA_EINVAL, "module 0 (%s): from=%d is not an earlier "
                                    "module (only -1, the model's input, comes before it)",
                                    l->desc->ops->name, l->desc->from);
        return strata__fail(STRATA_EINVAL, "module %d (%s): from=%d is not an earlier module "
                            "(-1: the model's input, else 0..%d)", l->index,
                            l->desc->ops->name, l->desc->from, l->index - 1);
}

/* The input's and the skip's layouts do not fit: both modules and both shapes named. */
static int misfit(const struct strata_layer *l, const char *need)
{
        char a[64], b[64], src[48];

        if (l->desc->from < 0)
                snprintf(src, sizeof(src), "the model's input");
        else
                snprintf(src, sizeof(src), "module %d (%s)'s output", l->desc->from,
                         l->from_name);
        return strata__fail(STRATA_EINVAL, "module %d (%s, from=%d): its input %s and %s %s "
                            "do not fit: %s", l->index, l->desc->ops->name, l->desc->from,
                            dims_text(&l->in_dims, a, sizeof(a)), src,
                            dims_text(&l->from_dims, b, sizeof(b)), need);
}

/* Same spatial extents (or both flat). */
static int same_extents(const struct strata_dims *a, const struct strata_dims *b)
{
        if (a->ndim != b->ndim)
                return 0;
        for (int i = 0; i < a->ndim && i < STRATA_MAX_SPATIAL; i++)
                if (a->size[i] != b->size[i])
                        return 0;
        return 1;
}

/* ---- Add: y = x + skip ---- */

static int add_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        STRATA_TRY(from_check(l));
        if (l->from_width != in || l->in_dims.channels != l->from_dims.channels ||
            !same_extents(&l->in_dims, &l->from_dims))
                return misfit(l, "add needs the same layout");
        *s = (struct strata_module_shape){ .out = in, .out_dims = l->in_dims, .reads_from = 1 };
        return STRATA_OK;
}

static void add_forward(struct strata_layer *l, const struct strata_step_ctx *c, const float *x,
                        float *y, int rows)
{
        size_t n = (size_t)rows * (size_t)l->out;

        c->k->copy(y, x, n);
        c->k->add(y, l->skip, n);
}

static void add_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                         const float *x, const float *y, const float *dy, float *dx, int rows)
{
        size_t n = (size_t)rows * (size_t)l->out;

        (void)x;
        (void)y;
        if (dx)
                c->k->copy(dx, dy, n);
        if (l->dskip && l->dskip_add)
                c->k->add(l->dskip, dy, n);
        else if (l->dskip)
                c->k->copy(l->dskip, dy, n);
}

const struct strata_module_ops strata_add = {
        .name = "add",
        .shape = add_shape,
        .forward = add_forward,
        .backward = add_backward,
};

/* ---- Concat: a row is x's channels then skip's (channels are outermost in a row) ---- */

static int concat_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        const struct strata_dims *d = &l->in_dims;

        STRATA_TRY(from_check(l));
        if (!same_extents(d, &l->from_dims))
                return misfit(l, "concat needs the same spatial extents");
        if ((long long)in + l->from_width > (1LL << 30))
                return misfit(l, "concat's output would hold more than 2^30 values a row");
        *s = (struct strata_module_shape){
                .out = in + l->from_width, .reads_from = 1,
                .out_dims = { d->channels + l->from_dims.channels, d->ndim,
                              { d->size[0], d->size[1], d->size[2] } } };
        return STRATA_OK;
}

static void concat_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                           const float *x, float *y, int rows)
{
        size_t in = (size_t)l->in, w = (size_t)l->from_width, out = (size_t)l->out;

        for (size_t r = 0; r < (size_t)rows; r++) {
                c->k->copy(y + r * out, x + r * in, in);
                c->k->copy(y + r * out + in, l->skip + r * w, w);
        }
}

static void concat_backward(struct strata_layer *l, const struct strata_step_ctx *c,
                            const float *x, const float *y, const float *dy, float *dx, int rows)
{
        size_t in = (size_t)l->in, w = (size_t)l->from_width, out = (size_t)l->out;

        (void)x;
        (void)y;
        for (size_t r = 0; r < (size_t)rows; r++) {
                if (dx)
                        c->k->copy(dx + r * in, dy + r * out, in);
                if (l->dskip && l->dskip_add)
                        c->k->add(l->dskip + r * w, dy + r * out + in, w);
                else if (l->dskip)
                        c->k->copy(l->dskip + r * w, dy + r * out + in, w);
        }
}

const struct strata_module_ops strata_concat = {
        .name = "concat",
        .shape = concat_shape,
        .forward = concat_forward,
        .backward = concat_backward,
};
