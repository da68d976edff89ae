/* The convolution tests' rig and double-precision reference (conv_ref.h). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/conv_ref.h"

#define S STRATA_PADDING_SAME

const struct conv_case conv_cases[] = {
        /* what, nd, cin, cout, rows, size, kernel, stride, dilation, padding, mode, no_bias */
        { "2d zeros k3 p1", 2, 2, 3, 3, { 5, 6 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 },
          STRATA_PAD_ZEROS, 0 },
        { "2d circular k3 p1", 2, 2, 3, 3, { 5, 6 }, { 3, 3 }, { 1, 1 }, { 1, 1 }, { 1, 1 },
          STRATA_PAD_CIRCULAR, 0 },
        { "2d reflect k3 p2 s2 odd", 2, 3, 2, 2, { 7, 5 }, { 3, 3 }, { 2, 2 }, { 1, 1 },
          { 2, 2 }, STRATA_PAD_REFLECT, 0 },
        { "2d replicate k3x2 p2x1 d1x2", 2, 2, 4, 3, { 6, 7 }, { 3, 2 }, { 1, 1 }, { 1, 2 },
          { 2, 1 }, STRATA_PAD_REPLICATE, 0 },
        { "2d circular same k4", 2, 1, 2, 3, { 5, 5 }, { 4, 4 }, { 1, 1 }, { 1, 1 }, { S, S },
          STRATA_PAD_CIRCULAR, 0 },
        { "2d reflect same k3 d2", 2, 2, 2, 2, { 6, 5 }, { 3, 3 }, { 1, 1 }, { 2, 2 }, { S, S },
          STRATA_PAD_REFLECT, 0 },
        { "2d zeros valid k3 s2 d2 no bias", 2, 2, 3, 3, { 9, 8 }, { 3, 3 }, { 2, 2 }, { 2, 2 },
          { 0, 0 }, STRATA_PAD_ZEROS, 1 },
        { "2d zeros same k2x5", 2, 2, 2, 2, { 4, 7 }, { 2, 5 }, { 1, 1 }, { 1, 1 }, { S, S },
          STRATA_PAD_ZEROS, 0 },
        { "1d zeros k5 s3 p2", 1, 2, 3, 3, { 11 }, { 5 }, { 3 }, { 1 }, { 2 }, STRATA_PAD_ZEROS,
          0 },
        { "1d circular k3 p1 d2", 1, 3, 2, 2, { 7 }, { 3 }, { 1 }, { 2 }, { 1 },
          STRATA_PAD_CIRCULAR, 0 },
        { "1d circular pad = extent", 1, 1, 2, 2, { 3 }, { 3 }, { 1 }, { 1 }, { 3 },
          STRATA_PAD_CIRCULAR, 0 },
        { "1d reflect k3 p2 s2", 1, 2, 2, 3, { 6 }, { 3 }, { 2 }, { 1 }, { 2 },
          STRATA_PAD_REFLECT, 0 },
        { "1d replicate same k4", 1, 2, 3, 2, { 6 }, { 4 }, { 1 }, { 1 }, { S },
          STRATA_PAD_REPLICATE, 1 },
        { "3d zeros k3 p1 s2", 3, 2, 3, 2, { 4, 5, 3 }, { 3, 3, 3 }, { 2, 2, 2 }, { 1, 1, 1 },
          { 1, 1, 1 }, STRATA_PAD_ZEROS, 0 },
        { "3d circular k2x3x3 p1", 3, 2, 2, 2, { 3, 4, 5 }, { 2, 3, 3 }, { 1, 1, 1 },
          { 1, 1, 1 }, { 1, 1, 1 }, STRATA_PAD_CIRCULAR, 0 },
        { "3d reflect k3 p1 d1x2x1", 3, 1, 3, 2, { 4, 5, 4 }, { 3, 3, 3 }, { 1, 1, 1 },
          { 1, 2, 1 }, { 1, 1, 1 }, STRATA_PAD_REFLECT, 0 },
        { "3d replicate k2 s1x2x1 p1x0x2 no bias", 3, 2, 2, 3, { 3, 5, 4 }, { 2, 2, 2 },
          { 1, 2, 1 }, { 1, 1, 1 }, { 1, 0, 2 }, STRATA_PAD_REPLICATE, 1 },
        { "3d circular same k3", 3, 1, 2, 2, { 3, 3, 4 }, { 3, 3, 3 }, { 1, 1, 1 },
          { 1, 1, 1 }, { S, S, S }, STRATA_PAD_CIRCULAR, 0 },
        /* stride 1, K <= 16, cout K <= 64: nn/conv.c's direct path over a padded copy */
        { "2d zeros k3 p1 one channel in", 2, 1, 4, 3, { 5, 9 }, { 3, 3 }, { 1, 1 }, { 1, 1 },
          { 1, 1 }, STRATA_PAD_ZEROS, 0 },
        { "2d reflect k3 p2x1 d2x1 one channel in", 2, 1, 3, 2, { 6, 7 }, { 3, 3 }, { 1, 1 },
          { 2, 1 }, { 2, 1 }, STRATA_PAD_REFLECT, 0 },
        { "3d zeros k2 p1x0x1 no bias", 3, 2, 2, 2, { 3, 4, 5 }, { 2, 2, 2 }, { 1, 1, 1 },
          { 1, 1, 1 }, { 1, 0, 1 }, STRATA_PAD_ZEROS, 1 },
        { "3d replicate k2x2x3 d1x2x1 p1", 3, 1, 3, 2, { 3, 5, 4 }, { 2, 2, 3 }, { 1, 1, 1 },
          { 1, 2, 1 }, { 1, 1, 1 }, STRATA_PAD_REPLICATE, 0 },
        /* more channels than positions: the forward's product runs transposed */
        { "2d reflect k3 s2 p1 cout 5 > 4 positions", 2, 2, 5, 3, { 3, 4 }, { 3, 3 }, { 2, 2 },
          { 1, 1 }, { 1, 1 }, STRATA_PAD_REFLECT, 0 },
};
const int conv_ncases = (int)(sizeof(conv_cases) / sizeof(conv_cases[0]));

#define MAXF (1 << 16)

static float xbuf[MAXF], ybuf[MAXF], dybuf[MAXF], dxbuf[MAXF], pbuf[MAXF], gbuf[MAXF];
static float auxbuf[1 << 18];

static const struct strata_module_ops *conv_ops(int nd)
{
        return nd == 1 ? &strata_conv1d : nd == 2 ? &strata_conv2d : &strata_conv3d;
}

/* PyTorch's reference padding and output extents (Conv's own rule for 'same'). */
static void ref_extents(struct conv_rig *r)
{
        const struct conv_case *cc = r->cc;

        for (int i = 0; i < 3; i++) {
                r->lo[i] = r->hi[i] = 0;
                r->out[i] = 1;
        }
        for (int i = 0; i < cc->nd; i++) {
                int j = 3 - cc->nd + i, k = cc->kernel[i], d = cc->dilation[i];

                if (cc->padding[i] == S) {
                        int total = d * (k - 1);

                        r->lo[j] = total / 2;
                        r->hi[j] = total - total / 2;
                } else {
                        r->lo[j] = r->hi[j] = cc->padding[i];
                }
                r->out[j] = (cc->size[i] + r->lo[j] + r->hi[j] - d * (k - 1) - 1) /
                                    cc->stride[i] + 1;
        }
}

void conv_rig_init(struct conv_rig *r, const struct conv_case *cc)
{
        const struct strata_device_ops *dev;
        int in = cc->cin;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &dev), STRATA_OK);
        memset(r, 0, sizeof(*r));
        r->cc = cc;
        r->desc = (struct strata_module){ .ops = conv_ops(cc->nd), .out = cc->cout,
                                          .padding_mode = cc->mode, .no_bias = cc->no_bias };
        for (int i = 0; i < cc->nd; i++) {
                r->desc.kernel[i] = cc->kernel[i];
                r->desc.stride[i] = cc->stride[i];
                r->desc.dilation[i] = cc->dilation[i];
                r->desc.padding[i] = cc->padding[i] ? cc->padding[i] : STRATA_PADDING_NONE;
                in *= cc->size[i];
        }
        r->l = (struct strata_layer){ .desc = &r->desc, .index = 2, .in = in, .param = pbuf,
                                      .grad = gbuf, .aux = auxbuf, .grad_fresh = 1,
                                      .in_dims = { .channels = cc->cin, .ndim = cc->nd } };
        memcpy(r->l.in_dims.size, cc->size, sizeof(cc->size));
        cr_assert_eq(r->desc.ops->shape(&r->l, in, &r->s), STRATA_OK, "%s: %s", cc->what,
                     strata_last_error());
        ref_extents(r);
        cr_assert_eq(r->s.out, cc->cout * r->out[0] * r->out[1] * r->out[2], "%s: width %d",
                     cc->what, r->s.out);
        cr_assert_leq((size_t)cc->rows * in, (size_t)MAXF);
        cr_assert_leq((size_t)cc->rows * r->s.out, (size_t)MAXF);
        cr_assert_leq(r->s.params, (size_t)MAXF);
        cr_assert_leq(cc->rows * r->s.aux_per_row, sizeof(auxbuf) / sizeof(float));
        r->l.out = r->s.out;
        r->l.out_dims = r->s.out_dims;
        r->l.nparam = r->s.params;
        r->l.naux_per_row = r->s.aux_per_row;
        r->desc.ops->init(&r->l, 42);
        for (size_t i = 0; i < r->s.params; i++)
                pbuf[i] += 0.05f * sinf(0.37f * (float)i);
        r->x = xbuf;
        r->y = ybuf;
        r->dy = dybuf;
        r->dx = dxbuf;
        for (int i = 0; i < cc->rows * in; i++)
                xbuf[i] = sinf(0.61f * (float)i + 0.2f);
        for (int i = 0; i < cc->rows * r->s.out; i++)
                dybuf[i] = cosf(0.43f * (float)i - 0.1f);
        r->c = (struct strata_step_ctx){ .k = dev->kernels, .seed = 9, .step = 1, .train = 1,
                                         .rows_global = cc->rows };
}

/* F.pad's modes: the source index of padded index @p i (from -lo), or -1 for a zero. */
static int ref_source(int i, int n, int mode)
{
        switch (mode) {
        case STRATA_PAD_CIRCULAR:
                return ((i % n) + n) % n;
        case STRATA_PAD_REFLECT:
                while (i < 0 || i >= n)
                        i = i < 0 ? -i : 2 * (n - 1) - i;
                return i;
        case STRATA_PAD_REPLICATE:
                return i < 0 ? 0 : i >= n ? n - 1 : i;
        default:
                return i < 0 || i >= n ? -1 : i;
        }
}

/* The rig's geometry as 3-D extents: input, kernel, stride, dilation (1 where unused). */
struct g3 {
        int in[3], k[3], s[3], d[3];
        size_t in_sp, out_sp, kvol;
};

static void g3_of(const struct conv_rig *r, struct g3 *g)
{
        const struct conv_case *cc = r->cc;

        g->in_sp = g->out_sp = g->kvol = 1;
        for (int j = 0; j < 3; j++) {
                int i = j - (3 - cc->nd);

                g->in[j] = i >= 0 ? cc->size[i] : 1;
                g->k[j] = i >= 0 ? cc->kernel[i] : 1;
                g->s[j] = i >= 0 ? cc->stride[i] : 1;
                g->d[j] = i >= 0 ? cc->dilation[i] : 1;
                g->in_sp *= (size_t)g->in[j];
                g->out_sp *= (size_t)r->out[j];
                g->kvol *= (size_t)g->k[j];
        }
}

/*
 * The flat index in a sample of channel @p c's input read by output position @p op and
 * kernel offset @p ko, or -1 for a zero.
 */
static long ref_tap(const struct conv_rig *r, const struct g3 *g, int c, size_t op, size_t ko)
{
        int o[3] = { (int)(op / ((size_t)r->out[1] * r->out[2])),
                     (int)(op / (size_t)r->out[2] % (size_t)r->out[1]),
                     (int)(op % (size_t)r->out[2]) };
        int k[3] = { (int)(ko / ((size_t)g->k[1] * g->k[2])), (int)(ko / (size_t)g->k[2] %
                                                                     (size_t)g->k[1]),
                     (int)(ko % (size_t)g->k[2]) };
        long at = c;

        for (int j = 0; j < 3; j++) {
                int src = ref_source(o[j] * g->s[j] - r->lo[j] + k[j] * g->d[j], g->in[j],
                                     r->cc->mode);

                if (src < 0)
                        return -1;
                at = at * g->in[j] + src;
        }
        return at;
}

void conv_ref_cols(const struct conv_rig *r, int n, float *cols)
{
        struct g3 g;

        g3_of(r, &g);
        for (int c = 0; c < r->cc->cin; c++)
                for (size_t k = 0; k < g.kvol; k++)
                        for (size_t p = 0; p < g.out_sp; p++) {
                                long t = ref_tap(r, &g, c, p, k);

                                cols[((size_t)c * g.kvol + k) * g.out_sp + p] =
                                        t >= 0 ? r->x[(size_t)n * r->l.in + t] : 0.0f;
                        }
}

void conv_ref_forward(const struct conv_rig *r, double *y)
{
        const struct conv_case *cc = r->cc;
        struct g3 g;
        size_t wsize = (size_t)cc->cout * cc->cin;

        g3_of(r, &g);
        wsize *= g.kvol;
        for (int n = 0; n < cc->rows; n++)
                for (int o = 0; o < cc->cout; o++)
                        for (size_t p = 0; p < g.out_sp; p++) {
                                double s = cc->no_bias ? 0.0 : r->l.param[wsize + o];

                                for (int c = 0; c < cc->cin; c++)
                                        for (size_t k = 0; k < g.kvol; k++) {
                                                long t = ref_tap(r, &g, c, p, k);
                                                size_t w = ((size_t)o * cc->cin + c) * g.kvol + k;

                                                if (t >= 0)
                                                        s += (double)r->l.param[w] *
                                                             r->x[(size_t)n * r->l.in + t];
                                        }
                                y[(size_t)n * r->l.out + (size_t)o * g.out_sp + p] = s;
                        }
}

void conv_ref_backward(const struct conv_rig *r, double *dx, double *dp)
{
        const struct conv_case *cc = r->cc;
        struct g3 g;
        size_t wsize = (size_t)cc->cout * cc->cin;

        g3_of(r, &g);
        wsize *= g.kvol;
        memset(dx, 0, sizeof(double) * (size_t)cc->rows * r->l.in);
        memset(dp, 0, sizeof(double) * r->l.nparam);
        for (int n = 0; n < cc->rows; n++)
                for (int o = 0; o < cc->cout; o++)
                        for (size_t p = 0; p < g.out_sp; p++) {
                                double d = r->dy[(size_t)n * r->l.out + (size_t)o * g.out_sp + p];

                                if (!cc->no_bias)
                                        dp[wsize + o] += d;
                                for (int c = 0; c < cc->cin; c++)
                                        for (size_t k = 0; k < g.kvol; k++) {
                                                long t = ref_tap(r, &g, c, p, k);
                                                size_t w = ((size_t)o * cc->cin + c) * g.kvol + k;
                                                size_t xi = (size_t)n * r->l.in + (size_t)t;

                                                if (t < 0)
                                                        continue;
                                                dp[w] += d * r->x[xi];
                                                dx[xi] += d * r->l.param[w];
                                        }
                        }
}

double conv_rel_err(const float *a, const double *b, size_t n)
{
        double worst = 0.0;

        for (size_t i = 0; i < n; i++) {
                double e = fabs(a[i] - b[i]) / (1.0 + fabs(b[i]));

                worst = e > worst ? e : worst;
        }
        return worst;
}
