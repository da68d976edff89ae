/*
 * The CUDA accelerator. Without a GPU (or without nvcc at build time) every test that needs
 * one skips and says why; the tests of what happens without one run everywhere.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cudacount.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

/* The CUDA driver when one is usable here; NULL and the reason otherwise. */
static const struct strata_device_ops *cuda(const char **why)
{
        const struct strata_device_ops *d = NULL;

        if (strata_device_driver(STRATA_ACCEL_CUDA, &d) != STRATA_OK) {
                *why = strata_last_error();
                return NULL;
        }
        return d;
}

#define NEED_GPU()                                                                             \
        do {                                                                                   \
                const char *why_ = NULL;                                                       \
                if (!cuda(&why_))                                                              \
                        cr_skip("no usable CUDA GPU: %s", why_);                               \
        } while (0)

Test(cuda_driver, lookup_is_complete_or_says_why)
{
        const struct strata_device_ops *d = NULL;
        int rc = strata_device_driver(STRATA_ACCEL_CUDA, &d);

        /* EINVAL here would mean the ops table lacks a mandatory op: never acceptable. */
        cr_assert(rc == STRATA_OK || rc == STRATA_ENODEV, "rc %d: %s", rc, strata_last_error());
        if (rc == STRATA_ENODEV) {
                cr_assert_null(d);
                cr_assert(strstr(strata_last_error(), "cuda"),
                          "message does not name the driver: %s", strata_last_error());
        } else {
                cr_assert_not_null(d->reserve, "the GPU's memory is reserved at init");
                cr_assert_gt(d->device_overhead, 0);
        }
}

Test(cuda_driver, init_without_gpu_fails_cleanly)
{
        const char *why = NULL;
        struct strata_runtime *rt = (struct strata_runtime *)&why; /* must stay untouched */
        struct strata_plan_info pl;
        struct rig r;

        if (cuda(&why))
                cr_skip("a GPU is present: the no-GPU path cannot be shown here");
        rig_init(&r, 0);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
#ifdef STRATA_HAVE_CUDA
        /* The plan is the driver's numbers: a GPU job is sized without the GPU (issue 58). */
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_gt(pl.device_bytes, 0);
#else
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_ENODEV);
#endif
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENODEV);
        cr_assert_eq(rt, (struct strata_runtime *)&why);
        cr_assert_neq(strata_last_error()[0], '\0');
}

Test(cuda_driver, plan_counts_device_memory_apart)
{
        struct strata_plan_info pl;
        struct rig r;

        NEED_GPU();
        rig_init_full(&r);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_gt(pl.device_bytes, pl.params * 2 * sizeof(float));
        cr_assert_gt(pl.pinned_bytes, 0);
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.devices = 2;
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_gt(pl.device_bytes, pl.params * 2 * sizeof(float));
}

/* dp and ddp with several logical devices on the GPU(s) here: as on the CPU, reproducibly. */
static void multi_matches_cpu(enum strata_strategy_kind kind)
{
        static float cpu[2048], gpu[2048], again[2048];
        struct rig r;
        size_t n = 16 * RIG_IN + 16 + 2 * 16 + 16 * RIG_CLASSES + RIG_CLASSES;

        NEED_GPU();
        rig_init_full(&r);
        for (int devices = 2; devices <= 3; devices++) {
                struct strata_config c = rig_cfg(&r, kind, devices, 1);
                double d;

                rig_train_cfg(&r, &c, 20, cpu, n);
                c.device.accelerator = STRATA_ACCEL_CUDA;
                rig_train_cfg(&r, &c, 20, gpu, n);
                rig_train_cfg(&r, &c, 20, again, n);
                d = rig_rel_diff(gpu, cpu, n);
                cr_assert_leq(d, 1e-4, "%d devices: CUDA differs from CPU by %g", devices, d);
                cr_assert_eq(memcmp(gpu, again, n * sizeof(float)), 0, "%d devices: runs differ",
                             devices);
        }
}

Test(cuda_driver, ddp_matches_cpu, .timeout = 120)
{
        multi_matches_cpu(STRATA_STRATEGY_DDP);
}

Test(cuda_driver, dp_matches_cpu, .timeout = 120)
{
        multi_matches_cpu(STRATA_STRATEGY_DP);
}

Test(cuda_driver, matches_cpu_after_20_steps)
{
        static float cpu[2048], gpu[2048];
        struct rig r;
        const float *p;
        size_t n;
        double d;

        NEED_GPU();
        rig_init_full(&r);
        {
                struct strata_runtime *rt;

                cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
                cr_assert_eq(strata_connect(rt), STRATA_OK);
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_leq(n, 2048);
        rig_train(&r, 20, cpu, n);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
        rig_train(&r, 20, gpu, n);
        d = rig_rel_diff(gpu, cpu, n);
        cr_assert_leq(d, 1e-4, "CUDA differs from CPU by %g after 20 steps", d);
}

Test(cuda_driver, reproducible_bitwise)
{
        static float a[2048], b[2048];
        struct strata_runtime *rt;
        struct rig r;
        const float *p;
        size_t n;

        NEED_GPU();
        rig_init_full(&r);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rig_train(&r, 20, a, n);
        rig_train(&r, 20, b, n);
        cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "two CUDA runs differ");
}

/* Every activation beside ReLU (the act kernels with the CPU's formulas): near the CPU's. */
Test(cuda_driver, activations_match_cpu, .timeout = 60)
{
        const struct strata_module_ops *acts[] = { &strata_tanh, &strata_sigmoid, &strata_gelu,
                                                   &strata_gelu_tanh, &strata_silu,
                                                   &strata_leaky_relu };
        static float cpu[2048], gpu[2048];
        size_t n = 16 * RIG_IN + 16 + 16 * RIG_CLASSES + RIG_CLASSES;
        struct rig r;
        double d;

        NEED_GPU();
        for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++) {
                rig_init(&r, 0);
                r.mods[1] = (struct strata_module){ .ops = acts[i], .slope = -0.2f };
                rig_train(&r, 20, cpu, n);
                r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
                rig_train(&r, 20, gpu, n);
                d = rig_rel_diff(gpu, cpu, n);
                cr_assert_leq(d, 1e-4, "%s: CUDA differs from CPU by %g", acts[i]->name, d);
        }
}

/* Mixed precision through cublasGemmEx: near the CPU's bf16/f16 runs, repeatable bitwise. */
Test(cuda_driver, mixed_precision_matches_cpu_and_repeats, .timeout = 60)
{
        static float cpu[2048], gpu[2048], again[2048];
        struct rig r;
        size_t n = RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES;

        NEED_GPU();
        for (int p = STRATA_PRECISION_BF16_MIXED; p <= STRATA_PRECISION_16_MIXED; p++) {
                double d;

                rig_init(&r, 0);
                r.cfg.precision.kind = (enum strata_precision)p;
                rig_train(&r, 20, cpu, n);
                r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
                rig_train(&r, 20, gpu, n);
                rig_train(&r, 20, again, n);
                d = rig_rel_diff(gpu, cpu, n);
                cr_assert_leq(d, 1e-2, "%s: CUDA differs from CPU by %g",
                              strata_precision_name(r.cfg.precision.kind), d);
                cr_assert_eq(memcmp(gpu, again, n * sizeof(float)), 0, "two CUDA runs differ");
        }
}

static void no_allocation(enum strata_strategy_kind kind, int devices)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_metrics m;
        struct rig r;
        float logits[RIG_BATCH * RIG_CLASSES];
        long cuda_calls, heap;

        NEED_GPU();
        rig_init_full(&r);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
        r.cfg.strategy.kind = kind;
        r.cfg.strategy.devices = devices;
        r.cfg.strategy.sync_bn = devices > 1;
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        r.cfg.optim.lr = 1e-3f;
        r.cfg.train.clip_norm = 1.0f;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        cuda_calls = cudacount_calls();
        strata_heapcount_start();
        while (strata_loader_next(&r.loader, &b)) {
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK);
                cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES),
                             STRATA_OK);
        }
        heap = strata_heapcount_stop();
        cr_assert_eq(cudacount_calls() - cuda_calls, 0, "CUDA allocation calls during steps");
        cr_assert(heap <= 0, "%ld host heap calls during CUDA steps", heap);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(cuda_driver, no_allocation_during_steps)
{
        no_allocation(STRATA_STRATEGY_SINGLE, 1);
}

Test(cuda_driver, no_allocation_during_ddp_steps, .timeout = 60)
{
        no_allocation(STRATA_STRATEGY_DDP, 2);
}

Test(cuda_driver, the_counter_sees_reservations)
{
        struct strata_runtime *rt;
        struct rig r;
        long before;

        NEED_GPU();
        rig_init(&r, 0);
        r.cfg.device.accelerator = STRATA_ACCEL_CUDA;
        before = cudacount_calls();
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(cudacount_calls() - before, 2, "init's cudaMalloc/cudaHostAlloc unseen");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* 1 when /proc/self/maps maps a file whose name contains @p what. */
static int mapped(const char *what)
{
        FILE *f = fopen("/proc/self/maps", "r");
        char line[1024];
        int found = 0;

        cr_assert_not_null(f);
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, what) != NULL;
        fclose(f);
        return found;
}

/* A CPU-only run never maps the CUDA runtime, cuBLAS or the CUDA plugin. */
Test(cuda_driver, cpu_run_maps_no_cuda_library)
{
        struct strata_runtime *rt;
        struct rig r;

        rig_init(&r, 1);
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.devices = 2;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(&r, rt, 3, NULL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert(!mapped("libcudart"), "a CPU run mapped libcudart");
        cr_assert(!mapped("libcublas"), "a CPU run mapped libcublas");
        cr_assert(!mapped("libstrata-cuda"), "a CPU run loaded the CUDA plugin");
}

/* Asking for CUDA loads the plugin built beside the library, and only then. */
Test(cuda_driver, asking_for_cuda_loads_the_plugin)
{
        const struct strata_device_ops *d;
        FILE *f = fopen(STRATA_BUILD_DIR "/libstrata-cuda.so", "r");

        if (!f)
                cr_skip("this build has no CUDA plugin (no CUDA toolkit, or CUDA=0)");
        fclose(f);
        cr_assert(!mapped("libstrata-cuda"));
        (void)strata_device_driver(STRATA_ACCEL_CUDA, &d); /* ENODEV without a GPU */
        cr_assert(mapped("libstrata-cuda.so"), "the plugin was not loaded");
        cr_assert(mapped("libcudart"), "the plugin brings the CUDA runtime");
}

/* A plugin that cannot be loaded is ENODEV with a message saying what was tried. */
Test(cuda_driver, missing_plugin_says_what_was_tried)
{
        const struct strata_device_ops *d = NULL;

        setenv("STRATA_CUDA_PLUGIN", "/nonexistent/libstrata-cuda.so", 1);
        cr_assert_eq(strata_device_driver(STRATA_ACCEL_CUDA, &d), STRATA_ENODEV);
        cr_assert_null(d);
        cr_assert_not_null(strstr(strata_last_error(), "/nonexistent/libstrata-cuda.so"), "%s",
                           strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "not loaded"), "%s", strata_last_error());
}
