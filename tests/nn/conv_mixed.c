/*
 * Under bf16-mixed and 16-mixed a convolution's GEMMs take operands rounded to the type and
 * sum in f32 (strata_gemm() within the sizes the module declares, lp_fixed): forward and
 * backward match PyTorch's definition in double on operands rounded to nearest even (weights,
 * inputs, output gradients; the bias added in f32), for a geometry of each dimension count.
 */
#include <criterion/criterion.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/conv_ref.h"

static double want[1 << 16], dx_want[1 << 16], dp_want[1 << 16];
static double exact[1 << 16], dp_exact[1 << 16];
static float keep_p[1 << 16], keep_x[1 << 16], keep_dy[1 << 16];

/* @p x rounded to f16 by the CPU's own conversion (F16C; clang lacks _Float16 on x86-64). */
__attribute__((target("f16c"))) static float rounded_f16(float x)
{
        return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

/* @p x rounded to bf16 or f16, round to nearest even. */
static float rounded(float x, enum strata_dtype dt)
{
        uint32_t u;

        if (dt == STRATA_F16)
                return rounded_f16(x);
        memcpy(&u, &x, sizeof(u));
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x, &u, sizeof(x));
        return x;
}

static void round_all(float *v, size_t n, enum strata_dtype dt)
{
        for (size_t i = 0; i < n; i++)
                v[i] = rounded(v[i], dt);
}

/*
 * The references on the rig's operands rounded, the operands then restored; the bias and its
 * gradient (sums of f32 output gradients) stay f32's.
 */
static void references(struct conv_rig *r, enum strata_dtype dt)
{
        size_t nx = (size_t)r->cc->rows * r->l.in, ny = (size_t)r->cc->rows * r->l.out;
        size_t nw = r->l.nparam - (r->cc->no_bias ? 0 : (size_t)r->cc->cout);

        memcpy(keep_p, r->l.param, r->l.nparam * sizeof(float));
        memcpy(keep_x, r->x, nx * sizeof(float));
        memcpy(keep_dy, r->dy, ny * sizeof(float));
        round_all(r->l.param, nw, dt);
        round_all(r->x, nx, dt);
        round_all(r->dy, ny, dt);
        conv_ref_forward(r, want);
        conv_ref_backward(r, dx_want, dp_want);
        memcpy(r->l.param, keep_p, r->l.nparam * sizeof(float));
        memcpy(r->x, keep_x, nx * sizeof(float));
        memcpy(r->dy, keep_dy, ny * sizeof(float));
        conv_ref_backward(r, exact, dp_exact);
        for (size_t i = nw; i < r->l.nparam; i++)
                dp_want[i] = dp_exact[i];
}

static void mixed(const struct conv_case *cc, enum strata_dtype dt)
{
        struct conv_rig r;
        size_t dim, bytes;
        void *scratch;
        double e;

        conv_rig_init(&r, cc);
        cr_assert_gt(r.s.lp_fixed, 0, "%s declares no GEMM", cc->what);
        dim = (size_t)r.l.in + (size_t)r.l.out; /* above every GEMM dimension of the layer */
        bytes = r.c.k->gemm_lp_bytes(dt, r.s.lp_fixed, dim);
        cr_assert_eq(r.c.k->prepare_lp(dt), STRATA_OK, "%s", strata_last_error());
        scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
        cr_assert_not_null(scratch);
        r.c.compute = dt;
        r.c.lp_scratch = scratch;
        r.c.lp_elems = r.s.lp_fixed;
        r.c.lp_dim = dim;
        references(&r, dt);
        r.desc.ops->forward(&r.l, &r.c, r.x, r.y, cc->rows);
        r.desc.ops->backward(&r.l, &r.c, r.x, r.y, r.dy, r.dx, cc->rows);
        e = conv_rel_err(r.y, want, (size_t)cc->rows * r.l.out);
        cr_assert_leq(e, 2e-6, "%s, %s: forward relative error %g", cc->what,
                      dt == STRATA_F16 ? "f16" : "bf16", e);
        e = conv_rel_err(r.dx, dx_want, (size_t)cc->rows * r.l.in);
        cr_assert_leq(e, 2e-6, "%s: dx relative error %g", cc->what, e);
        e = conv_rel_err(r.l.grad, dp_want, r.l.nparam);
        cr_assert_leq(e, 1e-5, "%s: dparam relative error %g", cc->what, e);
        free(scratch);
}

Test(conv_mixed, operands_rounded_sums_in_f32)
{
        static const int picks[] = { 1, 9, 14 }; /* 2-D circular, 1-D circular, 3-D circular */

        for (size_t i = 0; i < sizeof(picks) / sizeof(picks[0]); i++) {
                mixed(&conv_cases[picks[i]], STRATA_BF16);
                mixed(&conv_cases[picks[i]], STRATA_F16);
        }
}
