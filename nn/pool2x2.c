/*
 * MaxPool 2 x 2, stride 2, no padding, over planes of even width: the CNNs' pool, the one
 * nn/pool.c hands here (strata__max2x2_fits()). Its forward picks each window's first maximum
 * in scan order and its index (AVX2's form, arch/pick.h, or C's); its backward puts each
 * output's gradient on that index and +0 on the window's other inputs in one pass (AVX-512's
 * or AVX2's form, arch/spread.h, or C's), the ReLU before the pool folded in where the
 * replica's fused row loop asks (strata__maxpool_relu_backward()). Every form gives the same
 * bits: values are selected, never computed.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "arch/bits.h"
#include "arch/pick.h"
#include "arch/simd.h"
#include "arch/spread.h"
#include "nn/spatial.h"

/*
 * The scan order of a window is x00, x01, x10, x11, and pick(a, b) (b if b > a or b is a
 * NaN, else a: PyTorch's step) is associative: both orders give the first maximum, or the last
 * NaN when there is one. So pick(pick(pick(x00, x01), x10), x11) = pick(pick(x00, x01),
 * pick(x10, x11)): the horizontal picks of a block of whole input rows run as one flat loop
 * (a plane's rows are contiguous when the width is even: no row tails), and each output row
 * then picks between its two input rows. Same values, same argmax, as nn/pool.c's loops.
 */
#define PAIRS 1024 /* horizontal picks held on the stack at once (8 KiB) */

/* The 2 x 2 stride-2 pool without padding along the last two dimensions, one in front. */
int strata__max2x2_fits(const struct strata__spatial *g)
{
        return g->k[0] == 1 && g->s[0] == 1 && g->p[0] == 0 && g->k[1] == 2 && g->k[2] == 2 &&
               g->s[1] == 2 && g->s[2] == 2 && g->p[1] == 0 && g->p[2] == 0 &&
               g->d[1] == 1 && g->d[2] == 1 && g->in[2] % 2 == 0 && 2 * g->out[2] <= PAIRS;
}

/* pick() over @p n pairs of row @p r (input index @p base + 2 q): values and indices. */
static inline void pick_pairs(const float *restrict r, int32_t base, int n, float *restrict h,
                              int32_t *restrict hi)
{
        for (int q = 0; q < n; q++) {
                float a = r[2 * q], b = r[2 * q + 1];
                int take = b > a || isnan(b);

                h[q] = take ? b : a;
                hi[q] = base + 2 * q + take;
        }
}

/*
 * Lanes a row of vertical picks runs in: a row runs to the next multiple of them (the CNN's
 * rows of 14 and 7 outputs would leave scalar tails), computing values past its end into the
 * slice's next output rows, which are written after it; near the slice's end, exactly.
 */
#define ROW_LANES 8

/* Output rows of one (H, W) slice @p x (its first index @p base in the channel) into @p y. */
STRATA_SIMD static void max_2x2_slice(const struct strata__spatial *g, const float *restrict x,
                                      int32_t base, float *restrict y, int32_t *restrict arg)
{
        int ow = g->out[2], per = PAIRS / (2 * ow);
        int wide = (ow + ROW_LANES - 1) / ROW_LANES * ROW_LANES;
        float h[PAIRS + ROW_LANES];
        int32_t hi[PAIRS + ROW_LANES];

        for (int a0 = 0; a0 < g->out[1]; a0 += per) {
                int nr = g->out[1] - a0 < per ? g->out[1] - a0 : per;
                int32_t off = 2 * a0 * g->in[2];

                pick_pairs(x + off, base + off, 2 * nr * ow, h, hi);
                for (int e = 2 * nr * ow; e < 2 * nr * ow + ROW_LANES; e++) { /* read past */
                        h[e] = 0.0f;
                        hi[e] = 0;
                }
                for (int a = 0; a < nr; a++) {
                        const float *u = h + 2 * a * ow, *v = u + ow;
                        const int32_t *ui = hi + 2 * a * ow, *vi = ui + ow;
                        float *yr = y + (size_t)(a0 + a) * ow;
                        int32_t *ar = arg + (size_t)(a0 + a) * ow;
                        int n = (a0 + a) * ow + wide <= g->out[1] * ow ? wide : ow;

                        for (int e = 0; e < n; e++) { /* all read, masks not ?: (0113) */
                                float top = u[e], bot = v[e];
                                int32_t it = ui[e], ib = vi[e];
                                uint32_t m = -(uint32_t)(bot > top || isnan(bot));

                                yr[e] = m ? bot : top;
                                ar[e] = (int32_t)(((uint32_t)it & ~m) | ((uint32_t)ib & m));
                        }
                }
        }
}

/* The forms the CPU runs besides C's (decided once; tests can refuse them). */
#if defined(__x86_64__)
#define FORMS 1
static atomic_int forms = -1; /* device threads may race to the first call */
#endif
enum { FORM_AVX2 = 1, FORM_AVX512 = 2 };

/*
 * FORM_ bits: AVX2's forward (arch/pick.h) and backward rows (arch/spread.h), whole vectors,
 * in sanitized builds too; AVX-512's backward rows, preferred where the CPU has them (sanitized
 * builds run AVX2's, checked, not AVX-512's masked tails).
 */
static int cpu_forms(void)
{
#ifdef FORMS
        int f = atomic_load_explicit(&forms, memory_order_relaxed);

        if (f < 0) {
                __builtin_cpu_init();
                f = __builtin_cpu_supports("avx2") ? FORM_AVX2 : 0;
#ifndef STRATA_SANITIZED
                f |= __builtin_cpu_supports("avx512f") ? FORM_AVX512 : 0;
#endif
                atomic_store_explicit(&forms, f, memory_order_relaxed);
        }
        return f;
#else
        return 0;
#endif
}

#ifdef STRATA_TESTING
void strata__maxpool_force_c(int on)
{
#ifdef FORMS
        atomic_store_explicit(&forms, on ? 0 : -1, memory_order_relaxed);
#else
        (void)on;
#endif
}
#endif

#ifdef FORMS
/* Output @p e of the row whose top inputs are @p x (index @p i0): pick_pairs()'s steps. */
static void pick_one(const float *x, int w, int32_t i0, int e, float *y, int32_t *arg)
{
        float h[2];
        int32_t hi[2];
        int take;

        pick_pairs(x + 2 * e, i0 + 2 * e, 1, h, hi);
        pick_pairs(x + w + 2 * e, i0 + w + 2 * e, 1, h + 1, hi + 1);
        take = h[1] > h[0] || isnan(h[1]);
        y[e] = take ? h[1] : h[0];
        arg[e] = take ? hi[1] : hi[0];
}

/*
 * max_2x2_slice()'s outputs in AVX2, eight of a row at a time. A row's last block reads and
 * writes past the row, into the next rows of the call (whose outputs are written after it),
 * where its outputs stay before @p yend, the end of the call's; otherwise its last outputs go
 * one at a time. The reads then stay inside the call's input: a block's inputs past the row
 * are the windows of the outputs it computes past it, which are the call's.
 */
__attribute__((target("avx2"))) static void
max_2x2_slice_avx2(const struct strata__spatial *g, const float *x, int32_t base, float *y,
                   int32_t *arg, const float *yend)
{
        int ow = g->out[2], w = g->in[2];

        for (int a = 0; a < g->out[1]; a++) {
                const float *xr = x + (size_t)2 * a * w;
                float *yr = y + (size_t)a * ow;
                int32_t *ar = arg + (size_t)a * ow;
                int32_t i0 = base + 2 * a * w;
                int e = 0;

                for (; e < ow && yend - yr >= e + 8; e += 8)
                        strata__pick2x2_8(xr, w, i0, e, yr, ar);
                for (; e < ow; e++)
                        pick_one(xr, w, i0, e, yr, ar);
        }
}
#endif

/* Slice after slice, AVX2's form where the CPU has it. */
void strata__max2x2_forward(const struct strata__spatial *g, int rows, const float *x,
                            float *y, int32_t *arg)
{
        size_t in_sl = (size_t)g->in[1] * g->in[2], out_sl = (size_t)g->out[1] * g->out[2];
        size_t planes = (size_t)rows * (size_t)g->c;
        int avx2 = cpu_forms() & FORM_AVX2;

        for (size_t pl = 0; pl < planes; pl++)
                for (int dz = 0; dz < g->out[0]; dz++) {
                        const float *xs = x + pl * g->in_sp + dz * in_sl;
                        float *ys = y + pl * g->out_sp + dz * out_sl;
                        int32_t *as = arg + pl * g->out_sp + dz * out_sl;

#ifdef FORMS
                        if (avx2) {
                                max_2x2_slice_avx2(g, xs, (int32_t)(dz * in_sl), ys, as,
                                                   y + planes * g->out_sp);
                                continue;
                        }
#endif
                        max_2x2_slice(g, xs, (int32_t)(dz * in_sl), ys, as);
                }
        (void)avx2;
}

/*
 * One output row, one output at a time: the value's bits kept or cleared by a mask (and by
 * gate[e] > 0 where @p gate is not NULL).
 */
STRATA_SIMD static void max_2x2_back_row(int ow, int w, const float *restrict d,
                                         const float *restrict gate,
                                         const int32_t *restrict ar, int32_t i0,
                                         float *restrict r0, float *restrict r1)
{
        for (int e = 0; e < ow; e++) {
                int32_t t = ar[e] - (i0 + 2 * e);
                uint32_t b = strata__bits_f(0.0f + d[e]), q[4];

                if (gate)
                        b &= -(uint32_t)(gate[e] > 0.0f);

                q[0] = b & -(uint32_t)(t == 0);
                q[1] = b & -(uint32_t)(t == 1);
                q[2] = b & -(uint32_t)(t == w);
                q[3] = b & -(uint32_t)(t == w + 1);
                memcpy(r0 + 2 * e, q, sizeof(float) * 2);
                memcpy(r1 + 2 * e, q + 2, sizeof(float) * 2);
        }
}

/* The line 1 KiB past @p p into the caches (an address past a buffer's end: no fault). */
static inline void ahead(const void *p)
{
        __builtin_prefetch((const void *)((uintptr_t)p + 1024));
}

/*
 * The backward of one (H, W) slice: the windows do not overlap, so each input takes at most
 * one output's gradient, 0 + dy as the zeroed scatter adds it (a -0 gradient lands as +0),
 * and every other input 0: written in one pass, no memset, no scatter. A last odd row no
 * window reads is zeroed. Which of a window's four inputs takes the gradient is selected by
 * masks (arch/spread.h): a branch on it mispredicted about every other output, ~30 cycles
 * each, 15% of the CNN's step (decision 0109). Inside a convolution's loop over samples its
 * gradient, argmaxes and (@p gate, see strata__max2x2_backward()) outputs come from memory, a batch
 * apart: each row asks for its streams' lines 1 KiB ahead (4% of the CNN's step). @p form:
 * FORM_AVX512, FORM_AVX2 (the rows' form, decided once) or 0 (C's rows). @p room: the
 * call's outputs from @p dy on; AVX2's rows, which read and write past the row, run where the
 * call holds the outputs they read (their inputs then follow in dx), C's near its end.
 */
static void max_2x2_back_slice(const struct strata__spatial *g, const float *dy,
                               const float *gate, const int32_t *arg, int32_t base, float *dx,
                               int form, size_t room)
{
        int ow = g->out[2], w = g->in[2];

        (void)form; /* no x86: the C rows alone */
        (void)room;

        for (int a = 0; a < g->out[1]; a++) {
                const float *d = dy + (size_t)a * ow, *gr = gate ? gate + (size_t)a * ow : NULL;
                const int32_t *ar = arg + (size_t)a * ow;
                float *r0 = dx + (size_t)2 * a * w, *r1 = r0 + w;
                int32_t i0 = base + 2 * a * w;

                ahead(d); /* three streams from memory */
                ahead(ar);
                if (gr)
                        ahead(gr);
#ifdef FORMS
                if (form == FORM_AVX512) {
                        strata__spread2x2_row512(ow, w, d, gr, ar, i0, r0, r1);
                        continue;
                }
                if (form == FORM_AVX2 && room - (size_t)a * ow >= (size_t)(ow + 7) / 8 * 8) {
                        strata__spread2x2_row256(ow, w, d, gr, ar, i0, r0, r1);
                        continue;
                }
#endif
                max_2x2_back_row(ow, w, d, gr, ar, i0, r0, r1);
        }
        if (g->in[1] > 2 * g->out[1])
                memset(dx + (size_t)2 * g->out[1] * w, 0, (size_t)w * sizeof(float));
}

/* Slice after slice, the rows' form chosen once (nn/spatial.h says what @p gate does). */
void strata__max2x2_backward(const struct strata__spatial *g, const int32_t *arg,
                             const float *gate, const float *dy, float *dx, int rows)
{
        size_t in_sl = (size_t)g->in[1] * g->in[2], out_sl = (size_t)g->out[1] * g->out[2];
        int f = cpu_forms(), form = f & FORM_AVX512 ? FORM_AVX512 : f & FORM_AVX2;
        size_t outs = (size_t)rows * (size_t)g->c * g->out_sp;

        for (size_t pl = 0; pl < (size_t)rows * (size_t)g->c; pl++)
                for (int dz = 0; dz < g->out[0]; dz++) {
                        size_t o = pl * g->out_sp + dz * out_sl;

                        max_2x2_back_slice(g, dy + o, gate ? gate + o : NULL, arg + o,
                                           (int32_t)(dz * in_sl), dx + pl * g->in_sp + dz * in_sl,
                                           form, outs - o);
                }
}
