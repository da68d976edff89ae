/*
 * A convolution runs the ReLU and pooling after it inside its loop over samples (decision
 * 0046). The fused path gives the same bits as every module on its own (device.no_fusion 1):
 * the step losses and the trained parameters of the CNN, the U-Net and the ResNet (whose skip
 * connections read outputs in between, where fusion stops), under single, dp, ddp, zero1 and
 * fsdp, accumulation, bf16-mixed and 16-mixed, with plan == used and no heap call during the
 * steps. The fused path is taken where it should be and only there: modules that count their
 * calls' rows (the built-in ReLU and MaxPool underneath) see one row at a time when fused,
 * whole batches when not, in invariant mode, and past an output a skip connection reads. A
 * fused ReLU writes over its convolution's output: the plan holds one activation fewer; one
 * whose output is stored in bf16 (bf16-mixed, a Linear after it) gives the same bits too.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "nn/replica.h"
#include "tests/support/skipnet.h"

#define STEPS 12

struct variant {
        const char *name;
        enum strata_strategy_kind s;
        int devices;
        enum strata_precision prec;
        int accumulate;
};

static const struct variant variants[] = {
        { "single", STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 0 },
        { "dp x 2", STRATA_STRATEGY_DP, 2, STRATA_PRECISION_32, 0 },
        { "ddp x 2", STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 0 },
        { "zero1 x 2", STRATA_STRATEGY_ZERO1, 2, STRATA_PRECISION_32, 0 },
        { "fsdp x 2", STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_32, 0 },
        { "single, accumulate 3", STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 3 },
        { "single, bf16-mixed", STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_BF16_MIXED, 0 },
        { "ddp x 2, 16-mixed", STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_16_MIXED, 0 },
};

/* @p kind trained fused and unfused under every variant: bitwise the same run. */
static void same_bits(enum skipnet_kind kind)
{
        static struct skipnet_run fused, alone;

        for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
                const struct variant *v = &variants[i];
                struct strata_config c = skipnet_cfg(kind, v->s, v->devices);

                c.precision.kind = v->prec;
                c.train.accumulate = v->accumulate;
                skipnet_train(&c, STEPS, &fused);
                c.device.no_fusion = 1;
                skipnet_train(&c, STEPS, &alone);
                cr_assert_eq(fused.np, alone.np);
                for (int s = 0; s < STEPS; s++)
                        cr_assert_eq(memcmp(&fused.loss[s], &alone.loss[s], sizeof(double)), 0,
                                     "%s: step %d's loss %.17g fused, %.17g unfused", v->name,
                                     s, fused.loss[s], alone.loss[s]);
                for (size_t k = 0; k < fused.np; k++)
                        cr_assert_eq(memcmp(&fused.p[k], &alone.p[k], sizeof(float)), 0,
                                     "%s: parameter %zu %.9g fused, %.9g unfused", v->name, k,
                                     fused.p[k], alone.p[k]);
                cr_assert_leq(fused.heap_calls, 0, "%s: %ld heap calls during the fused steps",
                              v->name, fused.heap_calls);
                cr_assert(fused.loss[STEPS - 1] != fused.loss[0], "%s: it did not train",
                          v->name);
        }
}

Test(conv_fusion, cnn_same_bits_every_strategy, .timeout = 300)
{
        same_bits(SKIPNET_CNN);
}

Test(conv_fusion, unet_same_bits_every_strategy, .timeout = 300)
{
        same_bits(SKIPNET_UNET);
}

Test(conv_fusion, resnet_same_bits_every_strategy, .timeout = 300)
{
        same_bits(SKIPNET_RESNET);
}

/* ---- Which calls the modules after a convolution get ---- */

#define MODULES 16

/* Per module index: forward and backward calls over one row, and over more. */
static int one_row[MODULES][2], more_rows[MODULES][2];

static void count(int index, int backward, int rows)
{
        if (rows == 1)
                one_row[index][backward]++;
        else
                more_rows[index][backward]++;
}

/* A module kind that counts its calls, then runs the built-in @p real. */
#define COUNTED(sym, real)                                                                     \
        static int sym##_shape(const struct strata_layer *l, int in,                          \
                               struct strata_module_shape *s)                                  \
        {                                                                                      \
                return real.shape(l, in, s);                                                   \
        }                                                                                      \
        static void sym##_forward(struct strata_layer *l, const struct strata_step_ctx *c,    \
                                  const float *x, float *y, int rows)                          \
        {                                                                                      \
                count(l->index, 0, rows);                                                      \
                real.forward(l, c, x, y, rows);                                                \
        }                                                                                      \
        static void sym##_backward(struct strata_layer *l, const struct strata_step_ctx *c,   \
                                   const float *x, const float *y, const float *dy, float *dx, \
                                   int rows)                                                   \
        {                                                                                      \
                count(l->index, 1, rows);                                                      \
                real.backward(l, c, x, y, dy, dx, rows);                                       \
        }                                                                                      \
        static const struct strata_module_ops sym = {                                          \
                .name = #sym,                                                                  \
                .shape = sym##_shape,                                                          \
                .forward = sym##_forward,                                                      \
                .backward = sym##_backward,                                                    \
        };

COUNTED(counted_relu, strata_relu)
COUNTED(counted_pool, strata_maxpool2d)

#define CONV(c) { .ops = &strata_conv2d, .out = (c), .kernel = { 3 }, .padding = { 1 } }
#define RELU { .ops = &counted_relu }
#define POOL { .ops = &counted_pool, .kernel = { 2 } }

/* The CNN of SKIPNET_CNN with counting ReLUs and pools (modules 1, 2, 4, 5). */
static const struct strata_module cnn[] = {
        CONV(4), RELU, POOL, CONV(8), RELU, POOL, { .ops = &strata_flatten },
        { .ops = &strata_linear, .out = SKIPNET_CLASSES },
};

/*
 * A U-Net's first level: the concat reads the ReLU's output (module 1), so the pool after it
 * (2) runs alone; the second convolution's ReLU (6) is fused.
 */
static const struct strata_module unet[] = {
        CONV(4), RELU, POOL, { .ops = &strata_upsample }, { .ops = &strata_concat, .from = 1 },
        CONV(4), RELU, { .ops = &strata_flatten },
        { .ops = &strata_linear, .out = SKIPNET_CLASSES },
};

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct strata_model cnn_model = {
        .in_features = SKIPNET_IN, .nmodules = N(cnn), .modules = cnn,
        .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } };
static const struct strata_model unet_model = {
        .in_features = SKIPNET_IN, .nmodules = N(unet), .modules = unet,
        .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } };

/* Three steps of @p model on one device (one thread counts), the calls counted. */
static void run_counted(const struct strata_model *model, int no_fusion, int invariant)
{
        static struct skipnet_run run;
        struct strata_config c = skipnet_cfg(SKIPNET_CNN, STRATA_STRATEGY_SINGLE, 1);
        struct strata_memory_info mi;
        struct strata_runtime *rt;

        c.model = model;
        c.device.no_fusion = no_fusion;
        c.strategy.invariant = invariant;
        memset(one_row, 0, sizeof(one_row));
        memset(more_rows, 0, sizeof(more_rows));
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        skipnet_steps(rt, 0, 3, &run);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "used %zu bytes, planned %zu", mi.used, mi.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Module @p i ran one row at a time (@p fused) or over whole calls, forward and backward. */
static void ran(int i, int fused, const char *what)
{
        for (int b = 0; b < 2; b++) {
                const char *pass = b ? "backward" : "forward";

                if (fused) {
                        cr_assert_gt(one_row[i][b], 0, "%s: module %d's %s never ran a row",
                                     what, i, pass);
                        cr_assert_eq(more_rows[i][b], 0, "%s: module %d's %s ran %d calls of "
                                     "several rows", what, i, pass, more_rows[i][b]);
                } else {
                        cr_assert_eq(one_row[i][b], 0, "%s: module %d's %s ran %d calls of one "
                                     "row", what, i, pass, one_row[i][b]);
                        cr_assert_gt(more_rows[i][b], 0, "%s: module %d's %s never ran", what,
                                     i, pass);
                }
        }
}

Test(conv_fusion, conv_relu_maxpool_run_in_the_convolutions_loop)
{
        run_counted(&cnn_model, 0, 0);
        for (int i = 1; i <= 5; i += i == 2 ? 2 : 1)
                ran(i, 1, "fused");
}

Test(conv_fusion, no_fusion_and_invariant_mode_run_each_module_alone)
{
        run_counted(&cnn_model, 1, 0);
        for (int i = 1; i <= 5; i += i == 2 ? 2 : 1)
                ran(i, 0, "no_fusion");
        run_counted(&cnn_model, 0, 1); /* calls of one chunk each: 2 rows */
        for (int i = 1; i <= 5; i += i == 2 ? 2 : 1)
                ran(i, 0, "invariant");
}

Test(conv_fusion, fusion_stops_at_an_output_a_skip_connection_reads)
{
        run_counted(&unet_model, 0, 0);
        ran(1, 1, "the ReLU a concat reads"); /* its output is the group's last: fused */
        ran(2, 0, "the pool after it");
        ran(6, 1, "the second ReLU");
}

/*
 * The CNN's first ReLU and MaxPool 2 x 2 (even width) run their backwards as one inside the
 * convolution's loop (decision 0109), the second pair (odd width) each its own; under
 * no_fusion never (the same bits either way: cnn_same_bits_every_strategy).
 */
Test(conv_fusion, relu_and_pool_backwards_run_as_one_when_fused)
{
        static struct skipnet_run run;
        struct strata_config c = skipnet_cfg(SKIPNET_CNN, STRATA_STRATEGY_SINGLE, 1);

        strata__replica_folds = 0;
        skipnet_train(&c, 3, &run);
        cr_assert_eq(strata__replica_folds, 3 * SKIPNET_BATCH, "%d rows folded in 3 steps",
                     strata__replica_folds);
        c.device.no_fusion = 1;
        strata__replica_folds = 0;
        skipnet_train(&c, 3, &run);
        cr_assert_eq(strata__replica_folds, 0, "%d rows folded under no_fusion",
                     strata__replica_folds);
}

Test(conv_fusion, no_fusion_refuses_other_values)
{
        struct strata_config c = skipnet_cfg(SKIPNET_CNN, STRATA_STRATEGY_SINGLE, 1);
        struct strata_runtime *rt = NULL;

        c.device.no_fusion = 2;
        cr_assert_eq(strata_init(&rt, &c), STRATA_EINVAL);
        cr_assert_null(rt);
        cr_assert(strstr(strata_last_error(), "no_fusion 2"), "%s", strata_last_error());
        cr_assert_eq(strata_config_set(&c, "no_fusion", 1), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(c.device.no_fusion, 1);
}

Test(conv_fusion, a_fused_relu_keeps_no_buffer_of_its_own)
{
        struct strata_config c = skipnet_cfg(SKIPNET_CNN, STRATA_STRATEGY_SINGLE, 1);
        struct strata_plan_info fused, alone;
        /* the two ReLUs' outputs (4 x 6 x 6 and 8 x 3 x 3 a row) less one row's two gradient
         * buffers of the widest fused input (4 x 6 x 6) */
        size_t saved = sizeof(float) * (SKIPNET_BATCH * (4 * 36 + 8 * 9) - 2 * 4 * 36);

        cr_assert_eq(strata_plan(&c, &fused), STRATA_OK, "%s", strata_last_error());
        c.device.no_fusion = 1;
        cr_assert_eq(strata_plan(&c, &alone), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(alone.per_device, fused.per_device + saved - 1024,
                      "fused %zu bytes a device, unfused %zu: %zu saved, not about %zu",
                      fused.per_device, alone.per_device, alone.per_device - fused.per_device,
                      saved);
        cr_assert_leq(alone.per_device, fused.per_device + saved + 1024,
                      "fused %zu bytes a device, unfused %zu", fused.per_device,
                      alone.per_device);
}

/* conv2d(4,3,padding=1) relu linear(4): under bf16-mixed the ReLU's output, read by the
 * Linear, is stored in bf16, so the fused ReLU writes bf16 rows (not in place). */
static const struct strata_module conv_relu_linear[] = {
        CONV(4), { .ops = &strata_relu }, { .ops = &strata_linear, .out = SKIPNET_CLASSES },
};
static const struct strata_model crl_model = {
        .in_features = SKIPNET_IN, .nmodules = N(conv_relu_linear), .modules = conv_relu_linear,
        .in_dims = { 1, 2, { SKIPNET_HW, SKIPNET_HW } } };

/* STEPS steps of crl_model under bf16-mixed: the losses and parameters into @p out. */
static void run_crl(int no_fusion, struct skipnet_run *out)
{
        struct strata_config c = skipnet_cfg(SKIPNET_CNN, STRATA_STRATEGY_SINGLE, 1);
        struct strata_runtime *rt;
        const float *p;
        size_t n;

        c.model = &crl_model;
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        c.device.no_fusion = no_fusion;
        memset(out, 0, sizeof(*out));
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        skipnet_steps(rt, 0, STEPS, out);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_leq(n, (size_t)SKIPNET_NP_MAX);
        memcpy(out->p, p, n * sizeof(float));
        out->np = n;
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(conv_fusion, a_fused_relu_with_bf16_output_gives_the_same_bits)
{
        static struct skipnet_run fused, alone;

        run_crl(0, &fused);
        run_crl(1, &alone);
        cr_assert_eq(fused.np, alone.np);
        cr_assert_eq(memcmp(fused.loss, alone.loss, sizeof(fused.loss)), 0,
                     "the step losses differ");
        cr_assert_eq(memcmp(fused.p, alone.p, fused.np * sizeof(float)), 0,
                     "the trained parameters differ");
}

/* ---- Fusion with the other features: accumulate_reduce each (decision 0047) ---- */

/*
 * The CNN under zero2, fsdp and ddp on 2 devices, accumulation 3 reduced every micro-batch
 * (each layer's gradient reduced as its backward ends, the fused modules' ready() inside
 * their head's loop): fused bitwise unfused, and zero2's and fsdp's bits ddp's.
 */
Test(conv_fusion, cnn_accumulate_reduce_each_same_bits, .timeout = 300)
{
        static const enum strata_strategy_kind kinds[] = { STRATA_STRATEGY_DDP,
                                                           STRATA_STRATEGY_ZERO2,
                                                           STRATA_STRATEGY_FSDP };
        static const char *const names[] = { "ddp", "zero2", "fsdp" };
        static struct skipnet_run fused, alone, ddp, window;

        for (int i = 0; i < 3; i++) {
                struct strata_config c = skipnet_cfg(SKIPNET_CNN, kinds[i], 2);

                c.train.accumulate = 3;
                c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
                skipnet_train(&c, STEPS, &fused);
                c.device.no_fusion = 1;
                skipnet_train(&c, STEPS, &alone);
                cr_assert_eq(fused.np, alone.np);
                cr_assert_eq(memcmp(fused.loss, alone.loss, STEPS * sizeof(double)), 0,
                             "%s each: the step losses differ fused and unfused", names[i]);
                cr_assert_eq(memcmp(fused.p, alone.p, fused.np * sizeof(float)), 0,
                             "%s each: the parameters differ fused and unfused", names[i]);
                cr_assert_leq(fused.heap_calls, 0, "%s each: %ld heap calls", names[i],
                              fused.heap_calls);
                if (i == 0) {
                        ddp = fused;
                        c.device.no_fusion = 0;
                        c.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_WINDOW;
                        skipnet_train(&c, STEPS, &window);
                        cr_assert_neq(memcmp(window.p, ddp.p, ddp.np * sizeof(float)), 0,
                                      "ddp: each gave window's bits (nothing compared)");
                        continue;
                }
                cr_assert_eq(fused.np, ddp.np);
                cr_assert_eq(memcmp(fused.loss, ddp.loss, STEPS * sizeof(double)), 0,
                             "%s each: the step losses differ from ddp each's", names[i]);
                cr_assert_eq(memcmp(fused.p, ddp.p, ddp.np * sizeof(float)), 0,
                             "%s each: the parameters differ from ddp each's", names[i]);
        }
}
