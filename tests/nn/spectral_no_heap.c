/*
 * SpectralConv1d and SpectralConv2d allocate nothing as they run: after init (which makes
 * FFTW's plans), forward and backward over every extent from 1 to 64 whose prime factors are
 * at most 31, a few up to 1024, and 2-D grids (18 x 18 and 28 x 28 among them, where FFTW's own
 * two-dimensional real plans would allocate each time) count no heap call.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/modcall.h"
#include "tools/heapcount.h"

static float x[MODCALL_MAX], y[MODCALL_MAX], dx[MODCALL_MAX];

static int smooth(int n)
{
        for (int q = 2; q <= 31; q++)
                while (n % q == 0)
                        n /= q;
        return n == 1;
}

static void no_heap(const struct strata_module_ops *ops, struct strata_dims in, int m1, int m2)
{
        struct strata_module desc = { .ops = ops, .out = 1, .modes = { m1, m2 } };
        struct modcall *m = &(struct modcall){ 0 };
        long calls;

        modcall_init(m, &desc, in, 1);
        modcall_wave(x, m->l.in, 0.3, 0.1);
        strata_heapcount_start();
        m->desc.ops->forward(&m->l, &m->c, x, y, 1);
        m->l.grad_fresh = 1;
        m->desc.ops->backward(&m->l, &m->c, x, y, y, dx, 1);
        calls = strata_heapcount_stop();
        cr_assert_eq(m->l.failed, STRATA_OK);
        cr_assert_eq(calls, 0, "%s over %d x %d: %ld heap calls", ops->name, in.size[0],
                     in.size[1], calls);
}

Test(spectral_no_heap, every_extent_it_accepts)
{
        static const int big[] = { 128, 210, 512, 930, 1024 };

        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        for (int n = 1; n <= 64; n++)
                if (smooth(n))
                        no_heap(&strata_spectralconv1d, (struct strata_dims){ 1, 1, { n } },
                                n / 2 + 1, 0);
        for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++)
                no_heap(&strata_spectralconv1d, (struct strata_dims){ 1, 1, { big[i] } }, 5, 0);
        for (int h = 2; h <= 30; h += 4)
                for (int w = 3; w <= 31; w += 5)
                        no_heap(&strata_spectralconv2d, (struct strata_dims){ 1, 2, { h, w } },
                                h / 2, w / 2 + 1);
        no_heap(&strata_spectralconv2d, (struct strata_dims){ 1, 2, { 18, 18 } }, 4, 4);
        no_heap(&strata_spectralconv2d, (struct strata_dims){ 1, 2, { 28, 28 } }, 6, 6);
        no_heap(&strata_spectralconv2d, (struct strata_dims){ 1, 2, { 48, 40 } }, 8, 8);
}
