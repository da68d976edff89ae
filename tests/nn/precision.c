/*
 * Mixed precision: operand rounding (against an independent reference), the driver's
 * low-precision GEMM, loss-scale growth, backoff and skips agreed across devices, f32 master
 * weights, the memory plan, run-to-run bits, checkpoints, and bad input.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/drivers.h"
#include "strategy/internal.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

/* x rounded to @p bits significant bits, ties to even (nearbyint), exponent >= @p emin. */
static double round_ref(double x, int bits, int emin, double max)
{
        int e;
        double m, q;

        if (x == 0.0 || !isfinite(x))
                return x;
        m = frexp(x, &e);           /* x = m 2^e, 0.5 <= |m| < 1 */
        if (e - 1 < emin)           /* subnormal: a fixed quantum of 2^(emin - bits + 1) */
                bits -= emin - (e - 1);
        q = ldexp(nearbyint(ldexp(m, bits)), e - bits);
        return fabs(q) > max ? copysign(INFINITY, x) : q;
}

static double bf16_ref(double x)
{
        return round_ref(x, 8, -126, 3.3895313892515355e38);
}

static double f16_ref(double x)
{
        return round_ref(x, 11, -14, 65504.0);
}

static const struct strata_device_ops *cpu(void)
{
        const struct strata_device_ops *d;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &d), STRATA_OK);
        cr_assert(d->kernels->gemm_lp && d->kernels->gemm_lp_bytes && d->kernels->prepare_lp);
        return d;
}

/* The driver's rounding of each x[i], seen through gemm_lp: C (n x 1) = x (n x 1) * [1]. */
static void driver_round(enum strata_dtype dt, const float *x, float *out, int n)
{
        const struct strata_kernel_ops *d = cpu()->kernels;
        float one = 1.0f;
        size_t bytes = d->gemm_lp_bytes(dt, (size_t)n + 1, (size_t)n);
        void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);

        cr_assert_eq(d->prepare_lp(dt), STRATA_OK, "%s", strata_last_error());
        d->gemm_lp(dt, 0, 0, n, 1, 1, 1.0f, x, 1, &one, 1, 0.0f, out, 1, scratch);
        free(scratch);
}

Test(precision, rounding_is_to_nearest_even)
{
        /* bf16: 8 significant bits. Ties at 1 + 2^-8 (to 1) and 1 + 3 * 2^-8 (to 1 + 2^-6). */
        const float bx[] = { 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
                             -2.5f, 3.1415926f, FLT_MAX, 1e-30f, -0.0f, 65519.0f };
        const float fx[] = { 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65504.0f, 65519.0f,
                             65520.0f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f, 1e-3f, -7.77f };
        enum { NB = sizeof(bx) / sizeof(bx[0]), NF = sizeof(fx) / sizeof(fx[0]) };
        float out[16];

        driver_round(STRATA_BF16, bx, out, NB);
        for (int i = 0; i < NB; i++) {
                double want = bf16_ref(bx[i]);

                /* vdpbf16ps reads bf16 subnormals as zero: 1e-30 is normal in bf16. */
                cr_assert(out[i] == (float)want || (isinf(want) && isinf(out[i])),
                          "bf16(%a) = %a, want %a", bx[i], out[i], want);
        }
        cr_assert_eq(out[0], 1.0f);
        cr_assert_eq(out[1], 1.0f + 0x1p-6f);
        cr_assert(isinf(out[5]), "FLT_MAX rounds to infinity in bf16");
        driver_round(STRATA_F16, fx, out, NF);
        for (int i = 0; i < NF; i++) {
                double want = f16_ref(fx[i]);

                cr_assert(out[i] == (float)want || (isinf(want) && isinf(out[i])),
                          "f16(%a) = %a, want %a", fx[i], out[i], want);
        }
        cr_assert_eq(out[0], 1.0f);
        cr_assert(isinf(out[4]), "65520 rounds to infinity in f16");
        cr_assert_eq(out[5], 0x1p-24f);
        cr_assert_eq(out[6], 0.0f);
        cr_assert_eq(out[7], 0x1p-23f);
}

/*
 * Subnormals follow the bf16 path: bf16:avx512_bf16's vdpbf16ps treats subnormal inputs as
 * zero and flushes subnormal results (decision 0013); bf16:fma's f32 fused multiply-adds keep
 * both (IEEE, decision 0038). f16's subnormals survive (rounding_is_to_nearest_even: 2^-24).
 */
static void bf16_subnormals(void)
{
        const struct strata_kernel_ops *d = cpu()->kernels;
        const float x[] = { 1e-39f, 2e-38f }, y[2] = { 1e-20f, 1e-20f }, z[2] = { 1e-19f, 1e-19f };
        double p = 2.0 * bf16_ref(y[0]) * bf16_ref(z[0]); /* a subnormal sum of two products */
        float out[2];
        void *scratch = aligned_alloc(64, 1 << 20);

        driver_round(STRATA_BF16, x, out, 2);
        cr_assert_eq(out[1], (float)bf16_ref(x[1]), "a normal input is rounded: %a", out[1]);
        d->gemm_lp(STRATA_BF16, 0, 0, 1, 1, 2, 1.0f, y, 2, z, 1, 0.0f, out + 1, 1, scratch);
        if (!strcmp(strata__cpu_lp_name(), "bf16:avx512_bf16") ||
            !strcmp(strata__cpu_lp_name(), "bf16:amx")) {
                cr_assert_eq(out[0], 0.0f, "a subnormal bf16 input counts as 0: %a", out[0]);
                cr_assert_eq(out[1], 0.0f, "a subnormal product is flushed: %a", out[1]);
        } else {
                cr_assert_str_eq(strata__cpu_lp_name(), "bf16:fma");
                cr_assert_eq(out[0], (float)bf16_ref(x[0]), "a subnormal input is kept: %a",
                             out[0]);
                cr_assert(out[1] > 0.0f && fabs(out[1] - p) <= 0x1p-148,
                          "a subnormal sum is kept: %a, want %a", out[1], p);
        }
        free(scratch);
}

Test(precision, bf16_subnormals_follow_the_path)
{
        bf16_subnormals();
}

/* Tests named ..._bf16_fma run bf16:fma whatever the CPU (on this one it runs anyway). */
static void bf16_fma(void)
{
        strata__cpu_lp_force_fma(1);
}

Test(precision, bf16_subnormals_follow_the_path_bf16_fma, .init = bf16_fma)
{
        bf16_subnormals();
}

/*
 * Tests named ..._bf16_amx_emulated run bf16:amx whatever the CPU, its tile instructions
 * emulated (DAZ and FTZ as TDPBF16PS).
 */
static void bf16_amx_emulated(void)
{
        strata__cpu_lp_force_amx(STRATA__AMX_EMULATED);
}

Test(precision, bf16_subnormals_follow_the_path_bf16_amx_emulated, .init = bf16_amx_emulated)
{
        bf16_subnormals();
}

Test(precision, random_values_round_as_the_reference)
{
        enum { N = 4096 };
        static float x[N], out[N];

        srand(7);
        for (int i = 0; i < N; i++) /* magnitudes 2^-30 .. 2^30 and every mantissa */
                x[i] = ldexpf((float)rand() / (float)RAND_MAX + 0.5f, rand() % 61 - 30) *
                       (i & 1 ? -1.0f : 1.0f);
        for (int dt = 0; dt < 2; dt++) {
                driver_round(dt ? STRATA_F16 : STRATA_BF16, x, out, N);
                for (int i = 0; i < N; i++) {
                        double want = dt ? f16_ref(x[i]) : bf16_ref(x[i]);

                        cr_assert(out[i] == (float)want || (isinf(want) && isinf(out[i])),
                                  "%s(%a) = %a, want %a", dt ? "f16" : "bf16", x[i], out[i],
                                  want);
                }
        }
}

/* C = alpha op(A) op(B) + beta C over rounded operands, in double. */
static void gemm_ref(double (*rnd)(double), int ta, int tb, int m, int n, int k, float alpha,
                     const float *a, int lda, const float *b, int ldb, float beta, double *c,
                     const float *c0, int ldc)
{
        for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                        double s = 0.0;

                        for (int l = 0; l < k; l++)
                                s += rnd(ta ? a[l * lda + i] : a[i * lda + l]) *
                                     rnd(tb ? b[j * ldb + l] : b[l * ldb + j]);
                        c[i * ldc + j] = alpha * s + beta * (double)c0[i * ldc + j];
                }
}

/* Shapes past the f32 GEMM's k chunk (256) and bf16:fma's row block (256) included. */
static void gemm_lp_reference(void)
{
        const struct strata_kernel_ops *d = cpu()->kernels;
        const int shapes[][3] = { { 70, 33, 130 }, { 1, 1, 1 }, { 64, 64, 64 }, { 5, 97, 3 },
                                  { 300, 20, 520 } };

        for (int dt = 0; dt < 2; dt++) {
                enum strata_dtype t = dt ? STRATA_F16 : STRATA_BF16;

                cr_assert_eq(d->prepare_lp(t), STRATA_OK);
                for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
                        for (int tr = 0; tr < 4; tr++) {
                                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                                int ta = tr & 1, tb = tr >> 1, lda = ta ? m : k, ldb = tb ? k : n;
                                float *a = malloc(sizeof(float) * m * k);
                                float *b = malloc(sizeof(float) * k * n);
                                float *c = malloc(sizeof(float) * m * n);
                                float *c0 = malloc(sizeof(float) * m * n);
                                double *want = malloc(sizeof(double) * m * n);
                                size_t dim = (size_t)(m > n ? (m > k ? m : k) : (n > k ? n : k));
                                size_t bytes = d->gemm_lp_bytes(t, (size_t)m * k + (size_t)k * n,
                                                                dim);
                                void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);

                                for (int i = 0; i < m * k; i++)
                                        a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
                                for (int i = 0; i < k * n; i++)
                                        b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
                                for (int i = 0; i < m * n; i++)
                                        c[i] = c0[i] = (float)rand() / (float)RAND_MAX;
                                d->gemm_lp(t, ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, c, n,
                                           scratch);
                                gemm_ref(dt ? f16_ref : bf16_ref, ta, tb, m, n, k, 0.5f, a, lda,
                                         b, ldb, 0.25f, want, c0, n);
                                for (int i = 0; i < m * n; i++) /* f32 sums of k products */
                                        cr_assert_leq(fabs(c[i] - want[i]),
                                                      1e-6 * k + 1e-6 * fabs(want[i]),
                                                      "%s %dx%dx%d ta %d tb %d: [%d] %g vs %g",
                                                      dt ? "f16" : "bf16", m, n, k, ta, tb, i,
                                                      c[i], want[i]);
                                free(a), free(b), free(c), free(c0), free(want), free(scratch);
                        }
        }
}

Test(precision, gemm_lp_matches_a_reference_on_rounded_operands, .timeout = 60)
{
        gemm_lp_reference();
}

Test(precision, gemm_lp_matches_a_reference_on_rounded_operands_bf16_fma, .timeout = 60,
     .init = bf16_fma)
{
        gemm_lp_reference();
}

/*
 * alpha, beta and a bf16 C's bias meet the finished f32 sum of the products, on either bf16
 * path: C = alpha s + beta c0 and bf16(alpha s + bias), computed in f32, where s is the same
 * call's sum (alpha 1, beta 0). The fp32-stored forward (bias by fill_rows, then beta 1) and
 * the bf16-stored one (bias before the rounding) rely on it (decision 0016). k past the f32
 * GEMM's chunk (256) and m past bf16:fma's row block (256).
 */
static void scales_meet_the_finished_sum(void)
{
        enum { M = 300, N = 24, K = 600 };
        static float a[M * K], b[N * K], s[M * N], c[M * N], c0[M * N], bias[N];
        static uint16_t ch[M * N];
        const struct strata_kernel_ops *d = cpu()->kernels;
        const float alpha = -0.75f, beta = 0.5f;
        size_t bytes = d->gemm_lp_bytes(STRATA_BF16, (size_t)M * K + (size_t)N * K, K);
        void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);

        cr_assert_eq(d->prepare_lp(STRATA_BF16), STRATA_OK, "%s", strata_last_error());
        srand(11);
        for (int i = 0; i < M * K; i++)
                a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int i = 0; i < N * K; i++)
                b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (int i = 0; i < M * N; i++)
                c[i] = c0[i] = (float)rand() / (float)RAND_MAX;
        for (int j = 0; j < N; j++)
                bias[j] = (float)rand() / (float)RAND_MAX;
        d->gemm_lp(STRATA_BF16, 0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, s, N, scratch);
        d->gemm_lp(STRATA_BF16, 0, 1, M, N, K, alpha, a, K, b, K, beta, c, N, scratch);
        d->gemm_lp_io(&(struct strata_gemm_io){ .dt = STRATA_BF16, .tb = 1, .m = M, .n = N,
                                                .k = K, .alpha = alpha, .a = a, .lda = K,
                                                .b = b, .ldb = K, .c = ch, .ldc = N,
                                                .ct = STRATA_BF16, .bias = bias },
                      scratch);
        for (int i = 0; i < M * N; i++) {
                float f = alpha * s[i] + bias[i % N], got;
                uint32_t u = (uint32_t)ch[i] << 16;

                memcpy(&got, &u, 4);
                cr_assert_eq(c[i], alpha * s[i] + beta * c0[i], "%s: C[%d] %a, want %a",
                             strata__cpu_lp_name(), i, c[i], alpha * s[i] + beta * c0[i]);
                cr_assert_eq(got, (float)bf16_ref(f), "%s: bf16 C[%d] %a, want bf16(%a)",
                             strata__cpu_lp_name(), i, got, f);
        }
        free(scratch);
}

Test(precision, scales_and_bias_meet_the_finished_sum)
{
        scales_meet_the_finished_sum();
}

Test(precision, scales_and_bias_meet_the_finished_sum_bf16_fma, .init = bf16_fma)
{
        scales_meet_the_finished_sum();
}

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

static struct strata_runtime *start(struct rig *r, struct strata_config *c)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        (void)r;
        return rt;
}

static void params(struct strata_runtime *rt, int dev, float *out)
{
        const float *p;
        size_t n;

        cr_assert_eq(strata_parameters(rt, dev, &p, &n), STRATA_OK);
        cr_assert_eq(n, NP);
        memcpy(out, p, n * sizeof(float));
}

static struct strata_grad_scaler scaler(struct strata_runtime *rt)
{
        struct strata_grad_scaler s;

        cr_assert_eq(strata_grad_scaler_state(rt, &s), STRATA_OK);
        return s;
}

Test(precision, loss_scale_grows_after_clean_steps)
{
        struct rig r;
        struct strata_runtime *rt;
        struct strata_config c;

        rig_init(&r, 0);
        c = r.cfg;
        c.precision.kind = STRATA_PRECISION_16_MIXED;
        c.precision.loss_scale_init = 1.0f;
        c.precision.loss_scale_interval = 3;
        rt = start(&r, &c);
        cr_assert_eq(scaler(rt).scale, 1.0f);
        rig_steps(&r, rt, 7, NULL);
        cr_assert_eq(scaler(rt).scale, 4.0f, "doubles after steps 3 and 6: %g",
                     scaler(rt).scale);
        cr_assert_eq(scaler(rt).growth, 1);
        cr_assert_eq(scaler(rt).skipped, 0);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(precision, overflow_backs_off_and_skips_the_step)
{
        static float p0[NP], p1[NP];
        struct rig r;
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_grad_scaler s;

        rig_init(&r, 0);
        c = r.cfg;
        c.precision.kind = STRATA_PRECISION_16_MIXED;
        c.precision.loss_scale_init = 0x1p40f; /* the loss gradient overflows f16 */
        rt = start(&r, &c);
        params(rt, 0, p0);
        rig_steps(&r, rt, 1, NULL);
        params(rt, 0, p1);
        cr_assert_eq(memcmp(p0, p1, sizeof(p0)), 0, "a skipped step changed the parameters");
        s = scaler(rt);
        cr_assert_eq(s.scale, 0x1p39f);
        cr_assert_eq(s.skipped, 1);
        rig_steps(&r, rt, 40, NULL); /* halves until the gradients fit, then trains */
        s = scaler(rt);
        cr_assert(s.skipped > 1 && s.skipped < 41, "skipped %llu", (unsigned long long)s.skipped);
        cr_assert_eq(s.scale, ldexpf(1.0f, 40 - (int)s.skipped), "scale %g after %llu skips",
                     s.scale, (unsigned long long)s.skipped);
        params(rt, 0, p1);
        cr_assert_neq(memcmp(p0, p1, sizeof(p0)), 0, "the clean steps trained nothing");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* One device alone sees an overflow: every device skips with it (reduce_boolean_decision). */
Test(precision, every_device_skips_together, .timeout = 60)
{
        static float before[2][NP], after[2][NP];
        struct rig r;

        for (int kind = STRATA_STRATEGY_DP; kind <= STRATA_STRATEGY_DDP; kind++) {
                struct strata_config c;
                struct strata_runtime *rt;

                rig_init(&r, 0);
                c = rig_cfg(&r, (enum strata_strategy_kind)kind, 2, 0);
                c.precision.kind = STRATA_PRECISION_16_MIXED;
                rt = start(&r, &c);
                rig_steps(&r, rt, 2, NULL);
                params(rt, 0, before[0]);
                params(rt, 1, before[1]);
                cr_assert_eq(strata__inject_nonfinite_grad(rt, 1), STRATA_OK);
                rig_steps(&r, rt, 1, NULL);
                params(rt, 0, after[0]);
                params(rt, 1, after[1]);
                for (int d = 0; d < 2; d++)
                        cr_assert_eq(memcmp(before[d], after[d], sizeof(after[d])), 0,
                                     "strategy %d: device %d stepped", kind, d);
                cr_assert_eq(scaler(rt).skipped, 1, "strategy %d", kind);
                rig_steps(&r, rt, 2, NULL);
                params(rt, 0, after[0]);
                params(rt, 1, after[1]);
                cr_assert_eq(memcmp(after[0], after[1], sizeof(after[0])), 0,
                             "strategy %d: replicas diverged", kind);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
}

/* Master weights are f32: updates below bf16's resolution are kept. */
Test(precision, master_weights_stay_f32)
{
        static float p32[NP], pbf[NP];
        struct rig r;
        int fine = 0;

        for (int p = 0; p < 2; p++) {
                struct strata_config c;

                rig_init(&r, 0);
                c = r.cfg;
                c.precision.kind = p ? STRATA_PRECISION_BF16_MIXED : STRATA_PRECISION_32;
                rig_train_cfg(&r, &c, 5, p ? pbf : p32, NP);
        }
        for (int i = 0; i < NP; i++) {
                uint32_t u;

                memcpy(&u, &pbf[i], 4);
                fine += (u & 0xffffu) != 0; /* not a bf16 value */
        }
        cr_assert_gt(fine, NP / 2, "only %d of %d parameters hold more than bf16", fine, NP);
        cr_assert_leq(rig_rel_diff(pbf, p32, NP), 2e-2, "bf16-mixed strays from f32: %g",
                      rig_rel_diff(pbf, p32, NP));
        cr_assert_gt(rig_rel_diff(pbf, p32, NP), 0.0, "bf16-mixed computed in f32");
}

static void plan_equals_use_and_runs_repeat(void)
{
        static float a[NP], b[NP];
        struct rig r;

        for (int p = 1; p < STRATA_PRECISION_COUNT; p++)
                for (int kind = 0; kind < 3; kind++) {
                        struct strata_config c;
                        struct strata_plan_info plan, plan32;
                        struct strata_memory_info mem;
                        struct strata_runtime *rt;

                        rig_init(&r, 0);
                        c = rig_cfg(&r, (enum strata_strategy_kind)kind, kind ? 2 : 1, 0);
                        cr_assert_eq(strata_plan(&c, &plan32), STRATA_OK);
                        c.precision.kind = (enum strata_precision)p;
                        cr_assert_eq(strata_plan(&c, &plan), STRATA_OK);
                        cr_assert_gt(plan.bytes, plan32.bytes, "no GEMM scratch planned");
                        rt = start(&r, &c);
                        rig_steps(&r, rt, 3, NULL);
                        cr_assert_eq(strata_memory(rt, &mem), STRATA_OK);
                        cr_assert_eq(mem.planned, mem.used, "%s: planned %zu, used %zu",
                                     strata_precision_name(c.precision.kind), mem.planned,
                                     mem.used);
                        cr_assert_eq(mem.refusals, 0);
                        cr_assert_eq(strata_teardown(rt), STRATA_OK);
                        rig_train_cfg(&r, &c, 4, a, NP);
                        rig_train_cfg(&r, &c, 4, b, NP);
                        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "%s, strategy %d: runs differ",
                                     strata_precision_name(c.precision.kind), kind);
                }
}

Test(precision, plan_equals_use_and_runs_repeat_bitwise, .timeout = 60)
{
        plan_equals_use_and_runs_repeat();
}

Test(precision, plan_equals_use_and_runs_repeat_bitwise_bf16_fma, .timeout = 60,
     .init = bf16_fma)
{
        plan_equals_use_and_runs_repeat();
}

Test(precision, plan_equals_use_and_runs_repeat_bitwise_bf16_amx_emulated, .timeout = 120,
     .init = bf16_amx_emulated)
{
        plan_equals_use_and_runs_repeat();
}

Test(precision, scales_and_bias_meet_the_finished_sum_bf16_amx_emulated,
     .init = bf16_amx_emulated)
{
        scales_meet_the_finished_sum();
}

Test(precision, checkpoint_carries_the_loss_scale)
{
        char dir[] = "/tmp/strata-prec-XXXXXX", path[64];
        struct rig r;
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_grad_scaler s, back;

        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/a.ckpt", dir);
        rig_init(&r, 0);
        c = r.cfg;
        c.precision.kind = STRATA_PRECISION_16_MIXED;
        c.precision.loss_scale_init = 0x1p40f;
        c.precision.loss_scale_interval = 4;
        rt = start(&r, &c);
        rig_steps(&r, rt, 30, NULL);
        s = scaler(rt);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rt = start(&r, &c);
        cr_assert_eq(scaler(rt).scale, 0x1p40f);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        back = scaler(rt);
        cr_assert_eq(back.scale, s.scale);
        cr_assert_eq(back.growth, s.growth);
        cr_assert_eq(back.skipped, s.skipped);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(path);
        rmdir(dir);
}

Test(precision, bad_input_is_refused)
{
        struct rig r;
        struct strata_config c;
        struct strata_plan_info plan;
        struct driver_copy nolp;
        struct strata_runtime *rt = NULL;
        enum strata_precision p = STRATA_PRECISION_BF16_MIXED;

        rig_init(&r, 0);
        c = r.cfg;
        c.precision.kind = STRATA_PRECISION_COUNT;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "precision"));
        c.precision.kind = (enum strata_precision)-1;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt);
        c = r.cfg;
        c.precision.loss_scale_init = -1.0f;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        c.precision.loss_scale_init = NAN;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        c.precision.loss_scale_init = INFINITY;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        c = r.cfg;
        c.precision.loss_scale_interval = -2;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_EINVAL);
        /* A driver without a low-precision GEMM runs fp32 only. */
        driver_copy(&nolp, cpu());
        nolp.k.gemm_lp = NULL;
        c = r.cfg;
        c.device.driver = &nolp.dev;
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_ENOTSUP);
        cr_assert_not_null(strstr(strata_last_error(), "gemm_lp"), "%s", strata_last_error());
        c.precision.kind = STRATA_PRECISION_32;
        cr_assert_eq(strata_plan(&c, &plan), STRATA_OK);
        /* Names. */
        cr_assert_eq(strata_precision_parse("bf16", &p), STRATA_EINVAL);
        cr_assert_eq(p, STRATA_PRECISION_BF16_MIXED, "a refused name changed *out");
        cr_assert_eq(strata_precision_parse(NULL, &p), STRATA_EINVAL);
        cr_assert_eq(strata_precision_parse("16-mixed", NULL), STRATA_EINVAL);
        cr_assert_eq(strata_precision_parse("16-mixed", &p), STRATA_OK);
        cr_assert_eq(p, STRATA_PRECISION_16_MIXED);
        cr_assert_eq(strata_precision_parse("32-true", &p), STRATA_OK);
        cr_assert_eq(p, STRATA_PRECISION_32);
        cr_assert_null(strata_precision_name(STRATA_PRECISION_COUNT));
        cr_assert_str_eq(strata_precision_name(STRATA_PRECISION_BF16_MIXED), "bf16-mixed");
        cr_assert_eq(strata_grad_scaler_state(NULL, NULL), STRATA_EINVAL);
        c = r.cfg;
        rt = start(&r, &c);
        cr_assert_eq(strata_grad_scaler_state(rt, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__inject_nonfinite_grad(rt, 1), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
