/* During training steps nothing in the process allocates (counted by an interposer). */
#include <criterion/criterion.h>

#include "drivers/drivers.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

/* Train, evaluate and predict over an epoch with the heap counter on: it must stay at 0. */
static void no_heap_rig(struct rig *r, enum strata_strategy_kind kind, int n, int adamw,
                        enum strata_precision precision, enum strata_dtype grads);

static void no_heap(enum strata_strategy_kind kind, int n, int adamw,
                    enum strata_precision precision, enum strata_dtype grads)
{
        struct rig r;

        rig_init(&r, 1);
        no_heap_rig(&r, kind, n, adamw, precision, grads);
}

static void no_heap_rig(struct rig *r0, enum strata_strategy_kind kind, int n, int adamw,
                        enum strata_precision precision, enum strata_dtype grads)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_metrics m;
        struct rig r = *r0;
        float logits[RIG_BATCH * RIG_CLASSES];
        struct strata_memory_info mi;
        long calls;

        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        r.model.modules = r.mods;
        r.cfg.model = &r.model;
        r.loader.ds = &r.ds;
        r.cfg.strategy.kind = kind;
        r.cfg.strategy.devices = n;
        r.cfg.strategy.sync_bn = n > 1;
        r.cfg.strategy.replication_callbacks = kind == STRATA_STRATEGY_DP;
        r.cfg.precision.kind = precision;
        r.cfg.strategy.grad_allreduce = grads;
        if (adamw) {
                r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
                r.cfg.optim.momentum = 0.0f;
                r.cfg.optim.lr = 1e-3f;
        }
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        strata_heapcount_start();
        while (r.ds.xtype == STRATA_F64 ? strata_loader_next_indexed(&r.loader, &b)
                                        : strata_loader_next(&r.loader, &b)) {
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK);
                cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK);
                cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES),
                             STRATA_OK);
        }
        calls = strata_heapcount_stop();
        cr_assert_eq(calls, 0, "strategy %d, precision %s: %ld heap calls during training", kind,
                     strata_precision_name(precision), calls);
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned, "strategy %d: used %zu bytes, planned %zu", kind,
                     mi.used, mi.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(no_heap_training, dp_and_ddp)
{
        no_heap(STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_32, STRATA_F32);
        no_heap(STRATA_STRATEGY_DP, 3, 0, STRATA_PRECISION_32, STRATA_F32);
}

/* libxsmm's kernels are compiled at setup; a call only packs into the planned scratch. The
 * bf16 gradient all-reduce stages in the replica's planned buffer. */
Test(no_heap_training, mixed_precision)
{
        no_heap(STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_BF16_MIXED, STRATA_BF16);
        no_heap(STRATA_STRATEGY_DP, 2, 0, STRATA_PRECISION_16_MIXED, STRATA_F32);
        no_heap(STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
}

/* bf16:fma whatever the CPU: its f32 scratch of operands and sums is planned too. */
static void bf16_fma(void)
{
        strata__cpu_lp_force_fma(1);
}

Test(no_heap_training, mixed_precision_bf16_fma, .init = bf16_fma)
{
        no_heap(STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_BF16_MIXED, STRATA_BF16);
        no_heap(STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
}

/* bf16:amx (its tiles emulated) whatever the CPU: the panels and the tile, planned. */
static void bf16_amx_emulated(void)
{
        strata__cpu_lp_force_amx(STRATA__AMX_EMULATED);
}

Test(no_heap_training, mixed_precision_bf16_amx_emulated, .init = bf16_amx_emulated)
{
        no_heap(STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_BF16_MIXED, STRATA_BF16);
        no_heap(STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
}

static double x64[256 * RIG_IN];

/* Float targets: f64 rows of an arrays set converted where each device takes them. */
Test(no_heap_training, regression)
{
        struct rig r;

        rig_init_regression(&r, &strata_mse);
        no_heap_rig(&r, STRATA_STRATEGY_DDP, 2, 1, STRATA_PRECISION_32, STRATA_F32);
        rig_init_regression(&r, &strata_huber);
        for (int i = 0; i < 256 * RIG_IN; i++)
                x64[i] = ((const float *)r.ds.x)[i];
        cr_assert_eq(strata_dataset_arrays(&r.ds, x64, STRATA_F64, 256, RIG_IN, r.ds.t,
                                           STRATA_F32, RIG_OUT), STRATA_OK);
        no_heap_rig(&r, STRATA_STRATEGY_DP, 2, 0, STRATA_PRECISION_16_MIXED, STRATA_F32);
}

/* fsdp: layers gathered into and reduced from the planned layer buffers. */
Test(no_heap_training, fsdp)
{
        no_heap(STRATA_STRATEGY_FSDP, 3, 1, STRATA_PRECISION_32, STRATA_F32);
        no_heap(STRATA_STRATEGY_FSDP, 2, 0, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
}

/*
 * SpectralConv2d in an FNO block: FFTW's plans are made at connect, the steps only execute
 * them (new-array interface) on the layer's planned room; single, ddp, invariant, bf16-mixed.
 */
static void fno_rig(struct rig *r)
{
        rig_init_conv(r);
        cr_assert_eq(strata_model_parse("input(1,6,6) conv2d(8,1) spectralconv2d(8,3,2) "
                                        "conv2d(8,1,from=0) add(from=1) gelu linear(4)",
                                        r->mods, 6, &r->model), STRATA_OK, "%s",
                     strata_last_error());
}

Test(no_heap_training, spectral)
{
        struct rig r;

        fno_rig(&r);
        no_heap_rig(&r, STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_32, STRATA_F32);
        fno_rig(&r);
        no_heap_rig(&r, STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
        fno_rig(&r);
        r.cfg.strategy.invariant = 1;
        no_heap_rig(&r, STRATA_STRATEGY_DDP, 2, 0, STRATA_PRECISION_32, STRATA_F32);
}

/*
 * Invariant mode: chunk GEMMs, the pairwise tree's slots and the tree all-reduce, planned;
 * on 3 devices the gathered blocks, zero1's sharded state and fsdp's sharded parameters.
 */
Test(no_heap_training, invariant)
{
        struct rig r;

        for (int n = 2; n <= 4; n++) {
                rig_init(&r, 1);
                r.cfg.strategy.invariant = 1;
                no_heap_rig(&r, STRATA_STRATEGY_DDP, n, n == 4, STRATA_PRECISION_32, STRATA_F32);
        }
        rig_init(&r, 1);
        r.cfg.strategy.invariant = 1;
        no_heap_rig(&r, STRATA_STRATEGY_ZERO1, 3, 1, STRATA_PRECISION_32, STRATA_F32);
        rig_init(&r, 1);
        r.cfg.strategy.invariant = 1;
        no_heap_rig(&r, STRATA_STRATEGY_FSDP, 3, 0, STRATA_PRECISION_32, STRATA_F32);
        rig_init(&r, 1);
        r.cfg.strategy.invariant = 1;
        no_heap_rig(&r, STRATA_STRATEGY_DDP, 2, 1, STRATA_PRECISION_BF16_MIXED, STRATA_F32);
}

/*
 * Every micro-batch reduced (accumulate_reduce each, decision 0047): the layer buffer, the
 * reduce or reduce-scatter of every layer, the adds into the window's sum and the owners'
 * running sum of squares, under ddp, dp, zero2 and fsdp with clipping by norm.
 */
Test(no_heap_training, accumulate_each)
{
        static const enum strata_strategy_kind kinds[] = {
                STRATA_STRATEGY_DDP, STRATA_STRATEGY_DP, STRATA_STRATEGY_ZERO2,
                STRATA_STRATEGY_FSDP };
        struct rig r;

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                rig_init(&r, 1);
                r.cfg.train.accumulate = 3;
                r.cfg.train.clip_norm = 0.5f;
                r.cfg.train.accumulate_reduce = STRATA_ACCUMULATE_REDUCE_EACH;
                no_heap_rig(&r, kinds[i], 2 + (int)(i % 2), (int)(i / 2), STRATA_PRECISION_32,
                            STRATA_F32);
        }
}

Test(no_heap_training, zero_allocations_in_steps)
{
        no_heap(STRATA_STRATEGY_SINGLE, 1, 1, STRATA_PRECISION_32, STRATA_F32);
}

Test(no_heap_training, the_counter_sees_allocations)
{
        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        strata_heapcount_start();
        {
                void *volatile q = malloc(32);

                free(q);
        }
        cr_assert_eq(strata_heapcount_stop(), 2);
}
