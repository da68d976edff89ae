/*
 * bf16-mixed stores the activations between Linear and ReLU in bf16 (decision 0015): the
 * driver's bf16-storage GEMM and ReLU against independent references, the plan shrinking by
 * exactly the bytes of the bf16 boundaries, and training giving bitwise the parameters of
 * f32-stored activations (every value a GEMM reads was already rounded to bf16).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/drivers.h"
#include "strategy/internal.h"
#include "tests/support/devsim.h"
#include "tests/support/rig.h"

/* x rounded to bf16 (8 significant bits, ties to even) by frexp/nearbyint, as bits. */
static uint16_t bf16_bits(float x)
{
        int e;
        double m;
        float q;
        uint32_t u;

        if (x == 0.0f || !isfinite(x)) {
                memcpy(&u, &x, 4);
                return (uint16_t)(u >> 16);
        }
        m = frexp(x, &e);
        if (e - 1 < -126) /* subnormal: a fixed quantum of 2^-133 */
                q = (float)ldexp(nearbyint(ldexp(x, 133)), -133);
        else
                q = (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
        memcpy(&u, &q, 4);
        return (uint16_t)(u >> 16);
}

static float bf16_value(uint16_t h)
{
        uint32_t u = (uint32_t)h << 16;
        float f;

        memcpy(&f, &u, 4);
        return f;
}

static const struct strata_device_ops *cpu(void)
{
        const struct strata_device_ops *d;

        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CPU, &d), STRATA_OK);
        cr_assert(d->kernels->gemm_lp_io && d->kernels->relu_io &&
                  d->kernels->relu_backward_bf16);
        cr_assert_eq(d->kernels->prepare_lp(STRATA_BF16), STRATA_OK, "%s", strata_last_error());
        return d;
}

static float frand(void)
{
        return (float)rand() / (float)RAND_MAX - 0.5f;
}

/*
 * A bf16-stored operand gives the bits the same values given in f32 give (gemm_lp, itself
 * checked against a reference in precision.c); a bf16 C holds the f32 result (bias added
 * first, as fill_rows + beta 1 would) rounded once by the reference rounding. The last shape
 * has k past the f32 GEMM's chunk and m past bf16:fma's row block: the bias still meets the
 * finished sum.
 */
static void gemm_lp_io_bf16(void)
{
        const struct strata_kernel_ops *d = cpu()->kernels;
        const int shapes[][3] = { { 70, 33, 130 }, { 1, 1, 1 }, { 64, 64, 64 }, { 5, 97, 3 },
                                  { 300, 40, 600 } };

        srand(3);
        for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
                for (int tr = 0; tr < 4; tr++) {
                        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                        int ta = tr & 1, tb = tr >> 1, lda = ta ? m : k, ldb = tb ? k : n;
                        size_t dim = (size_t)(m > n ? (m > k ? m : k) : (n > k ? n : k));
                        size_t bytes = d->gemm_lp_bytes(STRATA_BF16,
                                                        (size_t)m * k + (size_t)k * n, dim);
                        void *scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
                        float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
                        uint16_t *ah = malloc(2u * m * k), *bh = malloc(2u * k * n);
                        uint16_t *ch = malloc(2u * m * n);
                        float *bias = malloc(sizeof(float) * n), *want = malloc(sizeof(float) * m * n);
                        float *got = malloc(sizeof(float) * m * n);

                        for (int i = 0; i < m * k; i++) { /* bf16 values, also held in f32 */
                                ah[i] = bf16_bits(frand());
                                a[i] = bf16_value(ah[i]);
                        }
                        for (int i = 0; i < k * n; i++) {
                                bh[i] = bf16_bits(frand());
                                b[i] = bf16_value(bh[i]);
                        }
                        for (int j = 0; j < n; j++)
                                bias[j] = frand();
                        for (int i = 0; i < m; i++)
                                memcpy(want + (size_t)i * n, bias, sizeof(float) * n);
                        d->gemm_lp(STRATA_BF16, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 1.0f, want,
                                   n, scratch);
                        for (int st = 1; st < 4; st++) { /* A, B or both stored in bf16 */
                                for (int i = 0; i < m; i++)
                                        memcpy(got + (size_t)i * n, bias, sizeof(float) * n);
                                d->gemm_lp_io(&(struct strata_gemm_io){
                                                      .dt = STRATA_BF16, .ta = ta, .tb = tb,
                                                      .m = m, .n = n, .k = k, .alpha = 1.0f,
                                                      .beta = 1.0f, .a = st & 1 ? (void *)ah : a,
                                                      .lda = lda,
                                                      .at = st & 1 ? STRATA_BF16 : STRATA_F32,
                                                      .b = st & 2 ? (void *)bh : b, .ldb = ldb,
                                                      .bt = st & 2 ? STRATA_BF16 : STRATA_F32,
                                                      .c = got, .ldc = n },
                                              scratch);
                                cr_assert_eq(memcmp(got, want, sizeof(float) * m * n), 0,
                                             "%dx%dx%d ta %d tb %d, bf16 operands %d: f32 C "
                                             "differs", m, n, k, ta, tb, st);
                        }
                        d->gemm_lp_io(&(struct strata_gemm_io){ .dt = STRATA_BF16, .ta = ta,
                                                                .tb = tb, .m = m, .n = n, .k = k,
                                                                .alpha = 1.0f, .a = ah,
                                                                .lda = lda, .at = STRATA_BF16,
                                                                .b = b, .ldb = ldb, .c = ch,
                                                                .ldc = n, .ct = STRATA_BF16,
                                                                .bias = bias },
                                      scratch);
                        for (int i = 0; i < m * n; i++)
                                cr_assert_eq(ch[i], bf16_bits(want[i]),
                                             "%dx%dx%d ta %d tb %d: C[%d] %04x, want bf16(%a)",
                                             m, n, k, ta, tb, i, ch[i], want[i]);
                        free(a), free(b), free(ah), free(bh), free(ch), free(bias), free(want);
                        free(got), free(scratch);
                }
}

Test(bf16_activations, gemm_lp_io_reads_and_writes_bf16, .timeout = 60)
{
        gemm_lp_io_bf16();
}

/* bf16:fma whatever the CPU (where the CPU has no AVX512_BF16 it runs anyway). */
static void bf16_fma(void)
{
        strata__cpu_lp_force_fma(1);
}

Test(bf16_activations, gemm_lp_io_reads_and_writes_bf16_bf16_fma, .timeout = 60,
     .init = bf16_fma)
{
        gemm_lp_io_bf16();
}

/* bf16:amx whatever the CPU: its tile instructions emulated. */
static void bf16_amx_emulated(void)
{
        strata__cpu_lp_force_amx(STRATA__AMX_EMULATED);
}

Test(bf16_activations, gemm_lp_io_reads_and_writes_bf16_bf16_amx_emulated, .timeout = 120,
     .init = bf16_amx_emulated)
{
        gemm_lp_io_bf16();
}

Test(bf16_activations, relu_over_bf16_storage)
{
        enum { N = 1500 }; /* several of the driver's chunks and a partial one */
        const struct strata_kernel_ops *d = cpu()->kernels;
        static float x[N], yf[N], dy[N], dx[N];
        static uint16_t xh[N], yh[N];

        srand(5);
        for (int i = 0; i < N; i++) {
                x[i] = frand() * 8.0f;
                xh[i] = bf16_bits(x[i]);
                dy[i] = frand();
        }
        x[0] = -0.0f;
        xh[0] = 0x8000;
        d->relu_io(x, STRATA_F32, yh, STRATA_BF16, N); /* f32 in, bf16 out: rounded */
        for (int i = 0; i < N; i++)
                cr_assert_eq(yh[i], x[i] > 0.0f ? bf16_bits(x[i]) : 0, "f32->bf16 [%d]", i);
        d->relu_io(xh, STRATA_BF16, yh, STRATA_BF16, N);
        for (int i = 0; i < N; i++)
                cr_assert_eq(yh[i], bf16_value(xh[i]) > 0.0f ? xh[i] : 0, "bf16->bf16 [%d]", i);
        d->relu_io(xh, STRATA_BF16, yf, STRATA_F32, N);
        for (int i = 0; i < N; i++)
                cr_assert_eq(yf[i], fmaxf(bf16_value(xh[i]), 0.0f), "bf16->f32 [%d]", i);
        d->relu_io(x, STRATA_F32, yf, STRATA_F32, N);
        for (int i = 0; i < N; i++)
                cr_assert_eq(yf[i], x[i] > 0.0f ? x[i] : 0.0f, "f32->f32 [%d]", i);
        d->relu_backward_bf16(yh, dy, dx, N); /* yh: the bf16 ReLU output */
        for (int i = 0; i < N; i++)
                cr_assert_eq(dx[i], bf16_value(yh[i]) > 0.0f ? dy[i] : 0.0f, "backward [%d]", i);
}

/* The same module kinds with bf16_io cleared: their activations stay f32. */
static int linear32_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        int rc = strata_linear.shape(l, in, s);

        s->bf16_io = 0;
        return rc;
}

static int relu32_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        int rc = strata_relu.shape(l, in, s);

        s->bf16_io = 0;
        return rc;
}

/* Variants that round their f32 output to bf16 values: what storing it in bf16 does. */
static void round_rows(float *y, int rows, int cols)
{
        for (size_t i = 0; i < (size_t)rows * cols; i++)
                y[i] = bf16_value(bf16_bits(y[i]));
}

static void linear_round_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                                 const float *x, float *y, int rows)
{
        strata_linear.forward(l, c, x, y, rows);
        round_rows(y, rows, l->out);
}

static void relu_round_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                               const float *x, float *y, int rows)
{
        strata_relu.forward(l, c, x, y, rows);
        round_rows(y, rows, l->out);
}

/* [0] Linear, [1] ReLU; [.][0] f32 output, [.][1] rounded output. */
static struct strata_module_ops ops32[2][2];

static int bf16_io(const struct strata_module *m)
{
        return m->ops == &strata_linear || m->ops == &strata_relu;
}

/*
 * The reference of model @p m with f32 activations: Linear and ReLU with bf16_io cleared
 * and, with @p rounding, rounding their output to bf16 values where the runtime stores it
 * in bf16 (between two bf16_io modules, not the logits). Module indices, hence parameter
 * initialisation and random streams, stay those of @p m.
 */
static void reference(const struct strata_model *m, int rounding, struct strata_module *mods,
                      struct strata_model *out)
{
        for (int k = 0; k < 2; k++)
                for (int rnd = 0; rnd < 2; rnd++) {
                        ops32[k][rnd] = k ? strata_relu : strata_linear;
                        ops32[k][rnd].shape = k ? relu32_shape : linear32_shape;
                        if (rnd)
                                ops32[k][rnd].forward = k ? relu_round_forward
                                                          : linear_round_forward;
                }
        for (int i = 0; i < m->nmodules; i++) {
                const struct strata_module *mi = &m->modules[i];
                int stored = rounding && i + 1 < m->nmodules && bf16_io(mi) &&
                             bf16_io(&m->modules[i + 1]);

                mods[i] = *mi;
                if (bf16_io(mi))
                        mods[i].ops = &ops32[mi->ops == &strata_relu][stored];
        }
        *out = (struct strata_model){ .in_features = m->in_features, .nmodules = m->nmodules,
                                      .modules = mods };
}

#define MAXP 1024

static size_t params_of(const struct strata_config *c)
{
        struct strata_plan_info plan;

        cr_assert_eq(strata_plan(c, &plan), STRATA_OK, "%s", strata_last_error());
        return plan.params;
}

/*
 * Six models: L-R-L (both boundaries bf16), L-BN-R-L (only R-L), L-R-Dropout-L (only L-R:
 * ReLU writes f32 from bf16), L-R-L-R-L (four), L-L (no activation: one), L-Tanh-L (none:
 * the other activations keep f32 on both sides). For each, under single, dp and ddp:
 * - each device's plan is smaller by exactly rows x width x 2 bytes per bf16 boundary than
 *   with the flags cleared (the whole region's size may round the difference away), and
 *   planned = used;
 * - training gives bitwise the parameters of f32 activations rounded to bf16 values after
 *   the module that writes them, where they are stored in bf16;
 * - where only ReLU and GEMMs read the bf16 values (all but L-R-Dropout-L), also those of
 *   f32 activations without that rounding: the GEMMs rounded them anyway. Dropout's scaling
 *   rounds again, so there the values differ, as they do under autocast.
 */
static void plan_shrinks_and_values_are_rounded(void)
{
        static float a[MAXP], b[MAXP];
        /* hidden widths stored in bf16 per model: 16 + 16, 16, 16, 16 + 16 + 8 + 8, 16, 0 */
        const int saved_width[6] = { 32, 16, 16, 48, 16, 0 };

        for (int model = 0; model < 6; model++)
                for (int kind = 0; kind < 3; kind++) {
                        struct rig r;
                        struct strata_config c, c32;
                        struct strata_plan_info p16, p32;
                        struct strata_memory_info mem;
                        struct strata_runtime *rt = NULL;
                        struct strata_module mods32[12];
                        struct strata_model m32;
                        size_t np, saved;

                        rig_init(&r, model == 1);
                        if (model == 2) {
                                r.mods[3] = r.mods[2];
                                r.mods[2] = (struct strata_module){ .ops = &strata_dropout,
                                                                    .p = 0.25f };
                                r.model.nmodules = 4;
                        } else if (model == 3) {
                                r.mods[4] = r.mods[2];
                                r.mods[2] = (struct strata_module){ .ops = &strata_linear,
                                                                    .out = 8 };
                                r.mods[3] = (struct strata_module){ .ops = &strata_relu };
                                r.model.nmodules = 5;
                        } else if (model == 4) {
                                r.mods[1] = r.mods[2];
                                r.model.nmodules = 2;
                        } else if (model == 5) {
                                r.mods[1] = (struct strata_module){ .ops = &strata_tanh };
                        }
                        c = rig_cfg(&r, (enum strata_strategy_kind)kind, kind ? 2 : 1, 0);
                        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
                        np = params_of(&c);
                        cr_assert_leq(np, MAXP);
                        cr_assert_eq(strata_plan(&c, &p16), STRATA_OK);
                        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
                        rig_steps(&r, rt, 3, NULL);
                        cr_assert_eq(strata_memory(rt, &mem), STRATA_OK);
                        cr_assert_eq(mem.planned, mem.used, "model %d, strategy %d", model,
                                     kind);
                        cr_assert_eq(strata_teardown(rt), STRATA_OK);
                        rig_train_cfg(&r, &c, 12, a, np);

                        c32 = c;
                        c32.model = &m32;
                        reference(&r.model, 0, mods32, &m32);
                        cr_assert_eq(strata_plan(&c32, &p32), STRATA_OK);
                        /* each device holds its share of the rows */
                        saved = (size_t)RIG_BATCH / (kind ? 2 : 1) * saved_width[model] * 2;
                        cr_assert_eq(p32.per_device - p16.per_device, saved,
                                     "model %d, strategy %d: a device's plan %zu vs %zu, want "
                                     "%zu less", model, kind, p16.per_device, p32.per_device,
                                     saved);
                        cr_assert_leq(p16.bytes, p32.bytes);
                        rig_train_cfg(&r, &c32, 12, b, np);
                        cr_assert_eq(memcmp(a, b, np * sizeof(float)) != 0, model == 2,
                                     "model %d, strategy %d: f32 activations give %s "
                                     "parameters (rel %g)", model, kind,
                                     model == 2 ? "the same" : "other",
                                     rig_rel_diff(a, b, np));
                        reference(&r.model, 1, mods32, &m32);
                        rig_train_cfg(&r, &c32, 12, b, np);
                        cr_assert_eq(memcmp(a, b, np * sizeof(float)), 0,
                                     "model %d, strategy %d: not the rounded f32 values "
                                     "(rel %g)", model, kind, rig_rel_diff(a, b, np));
                }
}

Test(bf16_activations, plan_shrinks_and_values_are_the_rounded_ones, .timeout = 120)
{
        plan_shrinks_and_values_are_rounded();
}

Test(bf16_activations, plan_shrinks_and_values_are_the_rounded_ones_bf16_fma, .timeout = 120,
     .init = bf16_fma)
{
        plan_shrinks_and_values_are_rounded();
}

/* A driver without the bf16 activation operations keeps them f32 (and still runs). */
Test(bf16_activations, a_driver_without_the_ops_keeps_f32)
{
        struct rig r;
        struct strata_config c;
        struct strata_plan_info with, without;
        struct driver_copy nobf;
        static float a[MAXP], b[MAXP];
        size_t np;

        rig_init(&r, 0);
        c = r.cfg;
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        np = params_of(&c);
        cr_assert_eq(strata_plan(&c, &with), STRATA_OK);
        rig_train_cfg(&r, &c, 8, a, np);
        driver_copy(&nobf, cpu());
        nobf.k.relu_io = NULL;
        c.device.driver = &nobf.dev;
        cr_assert_eq(strata_plan(&c, &without), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(without.per_device - with.per_device, (size_t)RIG_BATCH * 32 * 2);
        rig_train_cfg(&r, &c, 8, b, np);
        cr_assert_eq(memcmp(a, b, np * sizeof(float)), 0);
}
