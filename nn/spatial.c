/*
 * What the spatial modules share (nn/spatial.h): a layer's geometry over three dimensions, the
 * checks of its sample's layout and the words of their messages.
 */
#include <limits.h>
#include <stdio.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/spatial.h"

#define ND STRATA_MAX_SPATIAL

/* The extents of @p g's sample, every slot 1 and scale 1 until filled. */
void strata__spatial_start(const struct strata_layer *l, int nd, struct strata__spatial *g)
{
        *g = (struct strata__spatial){ .nd = nd, .c = l->in_dims.channels };
        for (int j = 0; j < ND; j++) {
                g->in[j] = g->out[j] = g->k[j] = g->s[j] = g->d[j] = g->up[j] = 1;
                if (j >= ND - nd)
                        g->in[j] = l->in_dims.size[j - (ND - nd)];
        }
}

/* The output extents from the per-slot rule already applied; the per-channel counts. */
void strata__spatial_counts(struct strata__spatial *g)
{
        g->in_sp = (size_t)g->in[0] * (size_t)g->in[1] * (size_t)g->in[2];
        g->out_sp = (size_t)g->out[0] * (size_t)g->out[1] * (size_t)g->out[2];
}

/* "3" when every dimension has 3, else "3 x 5": @p v over the sample's slots. */
const char *strata__spatial_fmt(char *buf, size_t n, const struct strata__spatial *g,
                                const int *v, int same)
{
        int at = 0, all = 1;

        for (int i = 1; i < g->nd; i++)
                all &= v[strata__spatial_slot(g, i)] == v[strata__spatial_slot(g, 0)];
        for (int i = 0; i < g->nd && (i == 0 || !(same && all)); i++)
                at += snprintf(buf + at, n - (size_t)at, "%s%d", i ? " x " : "",
                               v[strata__spatial_slot(g, i)]);
        return buf;
}

/* The input layout in words: "a flat vector of 784 features" or "2 channels of 8 x 8". */
static const char *fmt_input(char *buf, size_t n, const struct strata_layer *l)
{
        const struct strata_dims *d = &l->in_dims;
        int at;

        if (d->ndim == 0)
                snprintf(buf, n, "a flat vector of %d features", l->in);
        else {
                at = snprintf(buf, n, "%d channels of %d", d->channels, d->size[0]);
                for (int i = 1; i < d->ndim && i < ND; i++)
                        at += snprintf(buf + at, n - (size_t)at, " x %d", d->size[i]);
        }
        return buf;
}

/* The layer's input layout has @p nd spatial dimensions (0: any of 1..3) and holds @p in. */
int strata__spatial_check(const struct strata_layer *l, int in, int nd, const char *want)
{
        const struct strata_dims *d = &l->in_dims;
        long long n = d->channels;
        char what[96];

        if ((nd && d->ndim != nd) || (!nd && (d->ndim < 1 || d->ndim > ND)) || d->channels <= 0)
                return strata__fail(STRATA_EINVAL, "%s (module %d): needs an input of %s; its "
                                    "input is %s", l->desc->ops->name, l->index, want,
                                    fmt_input(what, sizeof(what), l));
        for (int i = 0; i < d->ndim; i++)
                n = d->size[i] > 0 && n <= INT_MAX ? n * d->size[i] : -1;
        if (n != in)
                return strata__fail(STRATA_EINVAL, "%s (module %d): its input layout (%s) does "
                                    "not hold its width %d", l->desc->ops->name, l->index,
                                    fmt_input(what, sizeof(what), l), in);
        return STRATA_OK;
}

/* Output width c * extents, or STRATA_EOVERFLOW past an int. */
int strata__spatial_width(const struct strata_layer *l, const struct strata__spatial *g,
                          int *out)
{
        long long n = g->c;

        for (int j = 0; j < ND; j++)
                n = n <= INT_MAX ? n * g->out[j] : n;
        if (n > INT_MAX)
                return strata__fail(STRATA_EOVERFLOW, "%s (module %d): an output of %lld values "
                                    "per sample is too large", l->desc->ops->name, l->index, n);
        *out = (int)n;
        return STRATA_OK;
}

/* The output layout of @p g: its channels over its output extents. */
struct strata_dims strata__spatial_dims(const struct strata__spatial *g)
{
        struct strata_dims d = { .channels = g->c, .ndim = g->nd };

        for (int i = 0; i < g->nd; i++)
                d.size[i] = g->out[strata__spatial_slot(g, i)];
        return d;
}
