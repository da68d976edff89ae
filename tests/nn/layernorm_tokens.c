/*
 * LayerNorm(C) on a (C, P) sample in place of `tokens layernorm(dims=1) tokens`
 * (nn/norm_tokens.c, what the replica's pass runs for the three modules, decision 0090): the
 * three modules' output, saved statistics, input gradient and parameter gradients (written,
 * then added on), bit for bit; and which layers it takes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "nn/norm_tokens.h"
#include "nn/replica.h"
#include "tests/support/rig.h"
#include "tests/support/modcall.h"

static float x[MODCALL_MAX], t[MODCALL_MAX], u[MODCALL_MAX], y3[MODCALL_MAX], yf[MODCALL_MAX];
static float dy[MODCALL_MAX], g1[MODCALL_MAX], g2[MODCALL_MAX], dx3[MODCALL_MAX];
static float dx1[MODCALL_MAX];

#define SAME(a, b, n, what) \
        cr_assert(!memcmp((a), (b), sizeof(float) * (size_t)(n)), "%s, C %d P %d", what, c, p)

/* The three modules' backward (@p a, @p b, @p d) against the fused one's (@p f). */
static void backward_both(struct modcall *a, struct modcall *b, struct modcall *d,
                          struct modcall *f, int c, int p, int rows)
{
        d->desc.ops->backward(&d->l, &d->c, u, y3, dy, g1, rows);
        b->desc.ops->backward(&b->l, &b->c, t, u, g1, g2, rows);
        a->desc.ops->backward(&a->l, &a->c, x, t, g2, dx3, rows);
        strata__ln_tokens_backward(&f->l, x, dy, dx1, rows, c);
        SAME(dx3, dx1, rows * c * p, "dx");
        SAME(b->grad, f->grad, 2 * c, "the parameter gradients");
}

static void same(int c, int p, int rows, float eps)
{
        struct strata_module tok = { .ops = &strata_tokens };
        struct strata_module ln = { .ops = &strata_layernorm, .norm_dims = 1, .eps = eps };
        struct modcall *a = &(struct modcall){ 0 }, *b = &(struct modcall){ 0 };
        struct modcall *d = &(struct modcall){ 0 }, *f = &(struct modcall){ 0 };
        int n = rows * c * p;

        modcall_init(a, &tok, (struct strata_dims){ c, 1, { p } }, rows);
        modcall_init(b, &ln, a->s.out_dims, rows);
        modcall_init(d, &tok, a->s.out_dims, rows);
        modcall_init(f, &ln, a->s.out_dims, rows);
        cr_assert(strata__ln_tokens_fits(&f->l, c));
        modcall_wave(b->param, 2 * c, 0.53, 0.4);
        memcpy(f->param, b->param, sizeof(float) * 2 * (size_t)c);
        modcall_wave(x, n, 0.37, 0.1);
        for (int i = 0; i < n; i++)
                x[i] = 3.0f * x[i] + 0.25f * (float)(i % p); /* a mean per position */
        modcall_wave(dy, n, 0.91, 0.2);
        a->desc.ops->forward(&a->l, &a->c, x, t, rows);
        b->desc.ops->forward(&b->l, &b->c, t, u, rows);
        d->desc.ops->forward(&d->l, &d->c, u, y3, rows);
        strata__ln_tokens_forward(&f->l, x, yf, rows, c);
        SAME(y3, yf, n, "y");
        SAME(b->aux, f->aux, rows * p * 4, "the saved statistics");
        backward_both(a, b, d, f, c, p, rows);
        b->l.grad_fresh = 0; /* the next backward adds onto them */
        f->l.grad_fresh = 0;
        backward_both(a, b, d, f, c, p, rows);
}

Test(layernorm_tokens, is_the_three_modules_bit_for_bit)
{
        same(16, 37, 4, 0.0f); /* the mesh's width: 4 blocks of 8 positions a row, 5 alone */
        same(64, 20, 4, 1e-3f);
        same(5, 9, 3, 0.0f);
        same(3, 8, 2, 0.5f);
        same(7, 3, 2, 0.0f); /* no whole block */
}

Test(layernorm_tokens, takes_only_layernorm_over_a_tokens_features)
{
        struct strata_module ln = { .ops = &strata_layernorm, .norm_dims = 1 };
        struct strata_module all = { .ops = &strata_layernorm };
        struct strata_module rms = { .ops = &strata_rmsnorm, .norm_dims = 1 };
        struct modcall *m = &(struct modcall){ 0 };

        modcall_init(m, &ln, (struct strata_dims){ 10, 1, { 16 } }, 1);
        cr_assert(strata__ln_tokens_fits(&m->l, 16));
        cr_assert(!strata__ln_tokens_fits(&m->l, 8), "groups of 16, not 8");
        modcall_init(m, &all, (struct strata_dims){ 10, 1, { 16 } }, 1);
        cr_assert(!strata__ln_tokens_fits(&m->l, 16), "over the whole sample");
        modcall_init(m, &rms, (struct strata_dims){ 10, 1, { 16 } }, 1);
        cr_assert(!strata__ln_tokens_fits(&m->l, 16), "RMSNorm");
        modcall_init(m, &ln, (struct strata_dims){ 4, 1, { STRATA__LN_TOKENS_MAX + 1 } }, 1);
        cr_assert(!strata__ln_tokens_fits(&m->l, STRATA__LN_TOKENS_MAX + 1), "too wide");
}

/*
 * Through the replica's pass: a chain `tokens layernorm tokens layernorm tokens` (two windows
 * of the pattern overlap at the middle `tokens`, 4 channels and 5 positions both fitting) and
 * a lone window train to the same parameters, bit for bit, as with the fusion switched off,
 * as does a window whose LayerNorm output an add reads again (no fusion there). The forward
 * and the backward must take the same windows: with the backward taking the upper one where
 * the forward took the lower, it read outputs the forward never wrote (so did the add, with
 * the rule on readers off: both tried).
 */
static void fused_as_unfused(const struct strata_module *mods, int n)
{
        float fused[512], plain[512];
        const float *p;
        size_t np;
        struct rig r;

        for (int off = 0; off <= 1; off++) {
                struct strata_runtime *rt;

                rig_init(&r, 0);
                r.model.modules = mods;
                r.model.nmodules = n;
                r.model.in_dims = (struct strata_dims){ 4, 1, { 5 } };
                strata__replica_unfused = off;
                rt = rig_open(&r.cfg);
                rig_steps(&r, rt, 6, NULL);
                cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
                cr_assert_leq(np, 512);
                memcpy(off ? plain : fused, p, sizeof(float) * np);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        strata__replica_unfused = 0;
        cr_assert(!memcmp(fused, plain, sizeof(float) * np), "%d modules", n);
}

Test(layernorm_tokens, a_model_trains_the_unfused_bits)
{
        static const struct strata_module chain[] = {
                { .ops = &strata_conv1d, .out = 4, .kernel = { 1 } },
                { .ops = &strata_tokens },
                { .ops = &strata_layernorm, .norm_dims = 1 },
                { .ops = &strata_tokens },
                { .ops = &strata_layernorm, .norm_dims = 1 },
                { .ops = &strata_tokens },
                { .ops = &strata_linear, .out = RIG_CLASSES },
        };
        static const struct strata_module lone[] = {
                { .ops = &strata_conv1d, .out = 4, .kernel = { 1 } },
                { .ops = &strata_tokens },
                { .ops = &strata_layernorm, .norm_dims = 1 },
                { .ops = &strata_tokens },
                { .ops = &strata_relu },
                { .ops = &strata_linear, .out = RIG_CLASSES },
        };

        /* the LayerNorm's output read again by an add: no fusion there (its output kept) */
        static const struct strata_module read[] = {
                { .ops = &strata_conv1d, .out = 4, .kernel = { 1 } },
                { .ops = &strata_tokens },
                { .ops = &strata_layernorm, .norm_dims = 1 },
                { .ops = &strata_tokens },
                { .ops = &strata_tokens },
                { .ops = &strata_add, .from = 2 },
                { .ops = &strata_linear, .out = RIG_CLASSES },
        };

        fused_as_unfused(chain, 7);
        fused_as_unfused(lone, 6);
        fused_as_unfused(read, 7);
}
