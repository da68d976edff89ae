/*
 * A convolution's columns (nn/conv_parts.h): one sample unfolded into a [K x P] matrix (im2col,
 * rows in the weight's order, K = C_in kD kH kW, P the output positions) and the columns'
 * gradient folded back onto the sample's input gradient (col2im), a padded position reading,
 * and adding onto, the source position its padding mode names (zeros: none). With stride 1,
 * the same through a padded copy of one channel at a time on the stack, and the padded copy
 * of a whole sample the direct path reads. Every position takes its terms in one fixed order:
 * the same bits whichever way runs.
 */
#include <string.h>

#include "strata/nn.h"
#include "arch/simd.h"
#include "arch/transpose.h"
#include "nn/conv_parts.h"

/*
 * Where padded index @p i (from -lo) of an extent @p n reads: the source index, or -1 for a
 * zero. The shape's checks keep circular within one period and reflect within one bounce.
 */
static int source(int i, int n, int mode)
{
        if (i >= 0 && i < n)
                return i;
        switch (mode) {
        case STRATA_PAD_CIRCULAR:
                return i < 0 ? i + n : i - n;
        case STRATA_PAD_REFLECT:
                return i < 0 ? -i : 2 * (n - 1) - i;
        case STRATA_PAD_REPLICATE:
                return i < 0 ? 0 : n - 1;
        default:
                return -1;
        }
}

/* Outputs [p0, p1) of a line read inside the input: p sw + w0 in [0, nw). */
static void inside(int nw, int sw, int w0, int ow, int *p0, int *p1)
{
        int a, b;

        if (sw == 1) { /* no division: the common case, once per line */
                a = w0 >= 0 ? 0 : -w0;
                b = nw - w0 < 0 ? 0 : nw - w0;
        } else {
                a = w0 >= 0 ? 0 : (-w0 + sw - 1) / sw;
                b = nw - 1 - w0 < 0 ? 0 : (nw - 1 - w0) / sw + 1;
        }
        *p0 = a < ow ? a : ow;
        *p1 = b < *p0 ? *p0 : b > ow ? ow : b;
}

/*
 * A row of the columns as the walk sees it: its first position and the stride between its
 * positions (1 in the columns' own [K x P] layout; K in a transposed [P x K] gradient).
 */
struct row {
        float *at;
        int ps;
};

/* Output @p p of a line read past its edge: through source(). */
static void edge(float *xp, struct row r, int p, int nw, int sw, int w0, int mode, int back)
{
        int iw = source(p * sw + w0, nw, mode);
        float *v = r.at + (size_t)p * r.ps;

        if (back) {
                if (iw >= 0)
                        xp[iw] += *v;
        } else {
                *v = iw >= 0 ? xp[iw] : 0.0f;
        }
}

/*
 * One line of a row against input line @p xp (@p nw wide): output p reads index p sw + w0.
 * The positions read inside the line run as a plain strided loop, the edges through source().
 * Gather (@p back 0) or scatter-add (1), in position order.
 */
static void walk_line(float *xp, struct row r, int nw, int sw, int w0, int ow, int mode,
                      int back)
{
        float *in = xp + w0;
        int p0, p1;

        inside(nw, sw, w0, ow, &p0, &p1);
        for (int p = 0; p < p0; p++)
                edge(xp, r, p, nw, sw, w0, mode, back);
        if (back)
                for (int p = p0; p < p1; p++)
                        in[p * sw] += r.at[(size_t)p * r.ps];
        else if (r.ps == 1 && sw == 1)
                memcpy(r.at + p0, in + p0, (size_t)(p1 - p0) * sizeof(float));
        else
                for (int p = p0; p < p1; p++)
                        r.at[(size_t)p * r.ps] = in[p * sw];
        for (int p = p1; p < ow; p++)
                edge(xp, r, p, nw, sw, w0, mode, back);
}

/*
 * One row of the columns (channel c, kernel offset (a, b, e)) against one sample, along W:
 * gather (@p back 0: row[p] = x[src]) or scatter-add (1: x[src] += row[p]) for every output
 * position, in position order. @p xr is the sample's channel plane.
 */
static void walk_row(const struct strata__conv_geom *g, float *xr, struct row r, int a, int b,
                     int e, int back)
{
        int nw = g->in[2], sw = g->s[2], ow = g->out[2];

        for (int od = 0; od < g->out[0]; od++) {
                int id = source(od * g->s[0] - g->lo[0] + a * g->d[0], g->in[0], g->mode);

                for (int oh = 0; oh < g->out[1]; oh++, r.at += (size_t)ow * r.ps) {
                        int ih = source(oh * g->s[1] - g->lo[1] + b * g->d[1], g->in[1], g->mode);
                        int w0 = e * g->d[2] - g->lo[2];
                        float *xp;

                        if (id < 0 || ih < 0) { /* a zero-padded plane or line */
                                for (int p = 0; p < ow && !back; p++)
                                        r.at[(size_t)p * r.ps] = 0.0f;
                                continue;
                        }
                        xp = xr + ((size_t)id * g->in[1] + (size_t)ih) * (size_t)nw;
                        walk_line(xp, r, nw, sw, w0, ow, g->mode, back);
                }
        }
}

/*
 * im2col (@p back 0) or its adjoint col2im (1) of one sample @p x against its columns, in
 * their [K x P] layout, or (@p trans, col2im only) a [P x K] one.
 */
static void walk(const struct strata__conv_geom *g, float *x, float *cols, int back, int trans)
{
        size_t rs = trans ? 1 : g->out_sp, k = 0;

        for (int c = 0; c < g->cin; c++) {
                float *xr = x + (size_t)c * g->in_sp;

                for (int a = 0; a < g->k[0]; a++)
                        for (int b = 0; b < g->k[1]; b++)
                                for (int e = 0; e < g->k[2]; e++, k++)
                                        walk_row(g, xr, (struct row){ cols + k * rs,
                                                                      trans ? (int)g->kk : 1 },
                                                 a, b, e, back);
        }
}

void strata__conv_im2col(const struct strata__conv_geom *g, const float *x, float *cols)
{
        walk(g, (float *)x, cols, 0, 0);
}

void strata__conv_col2im(const struct strata__conv_geom *g, float *dx, float *cols, int trans)
{
        walk(g, dx, cols, 1, trans);
}

/* A stride of 1 everywhere: the padded extents. */
int strata__conv_pad_of(const struct strata__conv_geom *g, struct strata__conv_pad *pd)
{
        pd->plane = 1;
        for (int j = 0; j < 3; j++) {
                if (g->s[j] != 1)
                        return 0;
                pd->e[j] = g->out[j] + g->d[j] * (g->k[j] - 1);
                pd->plane *= (size_t)pd->e[j];
        }
        return 1;
}

/* Sample @p x with its padding into @p xp (cin padded planes), through source(). */
void strata__conv_pad_sample(const struct strata__conv_geom *g,
                             const struct strata__conv_pad *pd, const float *x, float *xp)
{
        int nw = g->in[2], lo = g->lo[2], e2 = pd->e[2];
        int w0 = lo < e2 ? lo : e2, w1 = lo + nw < e2 ? lo + nw : e2;

        for (int c = 0; c < g->cin; c++)
                for (int a = 0; a < pd->e[0]; a++) {
                        int id = source(a - g->lo[0], g->in[0], g->mode);

                        for (int b = 0; b < pd->e[1]; b++, xp += e2) {
                                int ih = source(b - g->lo[1], g->in[1], g->mode);
                                const float *xr;

                                if (id < 0 || ih < 0) {
                                        memset(xp, 0, (size_t)e2 * sizeof(float));
                                        continue;
                                }
                                xr = x + (((size_t)c * g->in[0] + id) * g->in[1] + ih) * nw;
                                for (int w = 0; w < w0; w++) {
                                        int iw = source(w - lo, nw, g->mode);

                                        xp[w] = iw >= 0 ? xr[iw] : 0.0f;
                                }
                                memcpy(xp + w0, xr + (w0 - lo), (size_t)(w1 - w0) * sizeof(float));
                                for (int w = w1; w < e2; w++) {
                                        int iw = source(w - lo, nw, g->mode);

                                        xp[w] = iw >= 0 ? xr[iw] : 0.0f;
                                }
                        }
                }
}

/*
 * The columns of a stride-1 convolution from a padded copy of one channel at a time on the
 * stack (at most STRATA__CONV_PAD_STACK values): each column row's line is a plain copy of a
 * padded line, instead of walk()'s per-line edge handling and copy calls. The same values
 * (source()).
 */
#define LINE_BLOCK 8 /* floats a line copy moves at once */

/*
 * A line of @p n values in blocks of LINE_BLOCK: up to LINE_BLOCK - 1 values past the line are
 * read from @p src and written past @p dst, where the next line's copy writes them again
 * (a call per short line, 14 values in the CNN, cost more than the copy).
 */
static inline void copy_line_over(float *restrict dst, const float *restrict src, int n)
{
        for (int q = 0; q < n; q += LINE_BLOCK)
                memcpy(dst + q, src + q, LINE_BLOCK * sizeof(float));
}

/*
 * copy_line_over() for @p lines lines of @p ow values, @p pitch apart in the plane and
 * back to back in @p dst: a line of one or two blocks (the CNN's 14 values) as fixed moves,
 * no loop over its blocks and no bound test (the caller's row ends LINE_BLOCK before the
 * columns' end). The same values written: a copy.
 */
static inline void copy_lines_over(float *restrict dst, const float *restrict src, int ow,
                                   int lines, size_t pitch)
{
        int blocks = (ow + LINE_BLOCK - 1) / LINE_BLOCK;

        if (blocks == 2)
                for (int l = 0; l < lines; l++, dst += ow, src += pitch)
                        memcpy(dst, src, 2 * LINE_BLOCK * sizeof(float));
        else if (blocks == 1)
                for (int l = 0; l < lines; l++, dst += ow, src += pitch)
                        memcpy(dst, src, LINE_BLOCK * sizeof(float));
        else
                for (int l = 0; l < lines; l++, dst += ow, src += pitch)
                        copy_line_over(dst, src, ow);
}

/* A line of exactly @p n values: blocks of LINE_BLOCK, the last one overlapping the one before. */
static inline void copy_exact(float *restrict dst, const float *restrict src, int n)
{
        int q = 0;

        if (n < LINE_BLOCK) {
                memcpy(dst, src, (size_t)n * sizeof(float));
                return;
        }
        for (; q + LINE_BLOCK <= n; q += LINE_BLOCK)
                memcpy(dst + q, src + q, LINE_BLOCK * sizeof(float));
        if (q < n)
                memcpy(dst + n - LINE_BLOCK, src + n - LINE_BLOCK, LINE_BLOCK * sizeof(float));
}

/* Zero padding around the whole input (none cut off): every channel's plane, the same edges. */
static int zero_edges(const struct strata__conv_geom *g, const struct strata__conv_pad *pd)
{
        for (int j = 0; j < 3; j++)
                if (g->lo[j] < 0 || g->lo[j] + g->in[j] > pd->e[j])
                        return 0;
        return g->mode == STRATA_PAD_ZEROS;
}

/*
 * strata__conv_pad_sample() of channel @p x onto a plane whose edges hold zeros already: its
 * inside only, line by line (what source() gives there: the input's own values).
 */
static inline void copy_inside(const struct strata__conv_geom *g,
                               const struct strata__conv_pad *pd, const float *x, float *xp)
{
        int nw = g->in[2];

        for (int id = 0; id < g->in[0]; id++)
                for (int ih = 0; ih < g->in[1]; ih++, x += nw)
                        copy_exact(xp + strata__conv_line_at(pd, id + g->lo[0], ih + g->lo[1]) +
                                           g->lo[2],
                                   x, nw);
}

STRATA_SIMD void strata__conv_im2col_padded(const struct strata__conv_geom *g,
                                            const struct strata__conv_pad *pd, const float *x,
                                            float *cols)
{
        /* a line's copy reads past the plane's end */
        float buf[STRATA__CONV_PAD_STACK + LINE_BLOCK];
        struct strata__conv_geom one = *g;
        int ow = g->out[2];
        float *end = cols + g->kk * g->out_sp; /* the last line is copied exactly */
        int edges = zero_edges(g, pd);

        one.cin = 1;
        memset(buf + pd->plane, 0, LINE_BLOCK * sizeof(float)); /* read, never kept */
        if (edges) /* written once: every channel's plane has the same zeros */
                memset(buf, 0, pd->plane * sizeof(float));
        for (int c = 0; c < g->cin; c++) {
                if (edges)
                        copy_inside(g, pd, x + (size_t)c * g->in_sp, buf);
                else
                        strata__conv_pad_sample(&one, pd, x + (size_t)c * g->in_sp, buf);
                for (size_t r = 0; r < g->kvol; r++) {
                        const float *tap = buf + strata__conv_tap_at(g, pd, r);
                        float *dst = cols + ((size_t)c * g->kvol + r) * g->out_sp;

                        if (dst + g->out_sp + LINE_BLOCK <= end) { /* every row but the last */
                                for (int od = 0; od < g->out[0]; od++)
                                        copy_lines_over(dst + (size_t)od * g->out[1] * ow,
                                                        tap + strata__conv_line_at(pd, od, 0),
                                                        ow, g->out[1], (size_t)pd->e[2]);
                                continue;
                        }
                        for (int od = 0; od < g->out[0]; od++)
                                for (int oh = 0; oh < g->out[1]; oh++, dst += ow) {
                                        const float *src =
                                                tap + strata__conv_line_at(pd, od, oh);

                                        if (dst + ow + LINE_BLOCK <= end)
                                                copy_line_over(dst, src, ow);
                                        else
                                                memcpy(dst, src, (size_t)ow * sizeof(float));
                                }
                }
        }
}

/*
 * A transposed column gradient ([P x K]) read as [K x P] rows, STRIP rows at a time, each row
 * laid out as the padded plane lays out its positions (output line (od, oh) at
 * strata__conv_line_at(), the gaps between lines zero): rows [k0, k0 + STRIP) into @p dst,
 * @p sp floats apart, by 8 x 8 register transposes where the CPU has AVX2. col2im then adds a
 * whole row onto the plane in one loop: the gaps add +0 onto positions that never hold -0 (a
 * sum started at +0 is -0 only if every term is), which leaves every value as it was; the
 * values added, and their order, are those of the line loops. 8% of the conv module's
 * instructions went to reading one value every K floats and to the 14-value lines.
 */
#define STRIP 8
#define STRIP_MAX 1024 /* floats of a strip's row on the stack (32 KiB the strip) */

/* Where output position @p q of the strip's rows lies. */
static size_t strip_at(const struct strata__conv_geom *g, const struct strata__conv_pad *pd,
                       size_t q)
{
        size_t line = q / (size_t)g->out[2];

        return strata__conv_line_at(pd, (int)(line / (size_t)g->out[1]),
                                    (int)(line % (size_t)g->out[1])) + q % (size_t)g->out[2];
}

static void strip_plain(const struct strata__conv_geom *g, const struct strata__conv_pad *pd,
                        const float *src, size_t sp, float *dst)
{
        for (size_t q = 0; q < g->out_sp; q++)
                for (int j = 0; j < STRIP; j++)
                        dst[(size_t)j * sp + strip_at(g, pd, q)] = src[q * g->kk + (size_t)j];
}

#if defined(__x86_64__)
/*
 * Each 8 x 8 transpose (arch/transpose.h) puts positions [q, q + n) of one output line (n <= 8;
 * the lanes past n zero) into the rows at dst: up to 8 - n zeros land past the line, in its
 * gap or on the next line's start, which that line's own stores write after.
 */
__attribute__((target("avx2"))) static void strip_avx2(const struct strata__conv_geom *g,
                                                       const struct strata__conv_pad *pd,
                                                       const float *src, size_t sp, float *dst)
{
        int ow = g->out[2];
        size_t q = 0;

        for (int od = 0; od < g->out[0]; od++)
                for (int oh = 0; oh < g->out[1]; oh++) {
                        float *d = dst + strata__conv_line_at(pd, od, oh);

                        for (int w = 0; w < ow; w += 8, q += 8)
                                strata__transpose8(src + q * g->kk, g->kk, ow - w < 8 ? ow - w : 8, d + w,
                                       sp);
                        q -= (size_t)((8 - ow % 8) % 8); /* the last block's empty lanes */
                }
}
#endif

static void strip_of(const struct strata__conv_geom *g, const struct strata__conv_pad *pd,
                     const float *src, size_t sp, float *dst)
{
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx2")) {
                strip_avx2(g, pd, src, sp, dst);
                return;
        }
#endif
        strip_plain(g, pd, src, sp, dst);
}

/*
 * col2im of a stride-1 convolution with zero padding (the CNN's) onto a padded copy of one
 * channel at a time on the stack: each row of the columns ([K x P], or [P x K] with @p trans,
 * read through strips where K is whole strips) is added line by line (a strip's row: whole)
 * onto the plane's shifted lines, with no edge to handle (what lands in the padding is
 * dropped, as zero padding drops it), then the plane's inside is the channel's gradient. Each
 * input position takes its terms in walk()'s order, onto 0 (the rows in order, a position at
 * most once a row): the same bits.
 */
STRATA_SIMD void strata__conv_col2im_padded(const struct strata__conv_geom *g,
                                            const struct strata__conv_pad *pd, const float *cols,
                                            int trans, float *dx)
{
        float buf[STRATA__CONV_PAD_STACK], strip[STRIP * STRIP_MAX];
        size_t span = strip_at(g, pd, g->out_sp - 1) + 1, sp = span + 8; /* 8: past a line */
        int strips = trans && g->kk % STRIP == 0 && sp <= STRIP_MAX;
        size_t rs = trans ? 1 : g->out_sp, ps = trans ? g->kk : 1;
        int ow = g->out[2], nw = g->in[2];

        if (strips)
                memset(strip, 0, sizeof(float) * STRIP * sp); /* the gaps, kept zero */
        for (int c = 0; c < g->cin; c++) {
                memset(buf, 0, pd->plane * sizeof(float));
                for (size_t r = 0; r < g->kvol; r++) {
                        size_t k = (size_t)c * g->kvol + r;
                        float *tap = buf + strata__conv_tap_at(g, pd, r);
                        const float *src = cols + k * rs, *row = strip + k % STRIP * sp;

                        if (strips && k % STRIP == 0)
                                strip_of(g, pd, src, sp, strip);
                        for (size_t i = 0; strips && i < span; i++)
                                tap[i] += row[i];
                        for (int od = 0; od < g->out[0] && !strips; od++)
                                for (int oh = 0; oh < g->out[1]; oh++, src += (size_t)ow * ps) {
                                        float *dst = tap + strata__conv_line_at(pd, od, oh);

                                        for (int q = 0; q < ow; q++)
                                                dst[q] += src[(size_t)q * ps];
                                }
                }
                for (int id = 0; id < g->in[0]; id++)
                        for (int ih = 0; ih < g->in[1]; ih++, dx += nw)
                                memcpy(dx,
                                       buf + strata__conv_line_at(pd, id + g->lo[0],
                                                                  ih + g->lo[1]) + g->lo[2],
                                       (size_t)nw * sizeof(float));
        }
}
