/*
 * A small transformer-style model on sequences (5 tokens of 4 features, batch_first) through
 * the runtime: posembed, causal mha(2) with a residual add, rmsnorm, linear. Runs repeat
 * bitwise; in invariant mode one device and ddp on 2 are the same bits; zero1, zero2 and fsdp
 * on 2 are ddp's bits, dp within 1e-5 of single; a checkpoint resumes bitwise; training,
 * evaluation and prediction allocate nothing and use exactly the planned memory under single,
 * ddp, fsdp, zero2, 16- and bf16-mixed and invariant mode; the safetensors export has
 * PyTorch's names (layers.1.out_proj.weight) and PyTorch's model loaded from it predicts what
 * Strata predicts, for this model and for the guide's ViT-style line; spawn on 2 processes
 * gives ddp's bits on 2.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define SEQ 5
#define EMB 4 /* SEQ * EMB == RIG_IN */
#define STEPS 6

/* The rig's data and loader with the attention model over (SEQ, EMB) samples. */
static void attention_rig(struct rig *r)
{
        rig_init(r, 0);
        r->mods[0] = (struct strata_module){ .ops = &strata_posembed };
        r->mods[1] = (struct strata_module){ .ops = &strata_mha, .heads = 2, .causal = 1 };
        r->mods[2] = (struct strata_module){ .ops = &strata_add, .from = 0 };
        r->mods[3] = (struct strata_module){ .ops = &strata_rmsnorm, .eps = 1e-5f };
        r->mods[4] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model.nmodules = 5;
        r->model.in_dims = (struct strata_dims){ SEQ, 1, { EMB } };
}

/* The attention rig's parameter count. */
#define NP (SEQ * EMB + 4 * EMB * EMB + 4 * EMB + SEQ * EMB + RIG_IN * RIG_CLASSES + RIG_CLASSES)

/* @p rt's parameters into @p out (fsdp's shards put together; zero1/2 pad theirs). */
static void gather(struct strata_runtime *rt, const struct strata_config *c, float *out)
{
        size_t n, at = 0, len = 0;
        const float *p;

        if (c->strategy.kind != STRATA_STRATEGY_FSDP) {
                cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
                cr_assert_geq(n, NP);
                memcpy(out, p, NP * sizeof(float));
                return;
        }
        for (int d = 0; d < c->strategy.devices && at < NP; d++, at += len) {
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                len = d == 0 ? n : len;
                memcpy(out + at, p, sizeof(float) * (at + n > NP ? NP - at : n));
        }
}

static size_t params_of(struct rig *r, float *out)
{
        struct strata_runtime *rt = rig_open(&r->cfg);

        rig_steps(r, rt, STEPS, NULL);
        gather(rt, &r->cfg, out);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return NP;
}

Test(attention_parallel, runs_repeat_and_invariant_mode_is_the_same_bits_on_2_devices,
     .timeout = 120)
{
        static float single[4096], again[4096], ddp[4096], inv1[4096], inv2[4096];
        struct rig r;
        size_t np;

        attention_rig(&r);
        np = params_of(&r, single);
        cr_assert_eq(params_of(&r, again), np);
        cr_assert_eq(memcmp(single, again, np * sizeof(float)), 0, "single runs differ");
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        params_of(&r, ddp);
        cr_assert_leq(rig_rel_diff(ddp, single, np), 1e-5, "ddp on 2: %g",
                      rig_rel_diff(ddp, single, np));
        r.cfg.strategy.invariant = 1;
        params_of(&r, inv2);
        r.cfg.strategy.kind = STRATA_STRATEGY_SINGLE;
        r.cfg.strategy.devices = 1;
        params_of(&r, inv1);
        cr_assert_eq(memcmp(inv1, inv2, np * sizeof(float)), 0,
                     "invariant mode: one device and ddp on 2 differ (%g)",
                     rig_rel_diff(inv2, inv1, np));
}

/* The groups by PyTorch's names, initialised as PyTorch's (xavier in_proj, zero biases). */
Test(attention_parallel, groups_named_and_initialised_as_pytorch)
{
        static const char *const names[] = {
                "layers.0.weight", "layers.1.in_proj_weight", "layers.1.in_proj_bias",
                "layers.1.out_proj.weight", "layers.1.out_proj.bias", "layers.3.weight",
                "layers.4.weight", "layers.4.bias",
        };
        float bound = sqrtf(6.0f / (float)(4 * EMB)), largest = 0.0f;
        struct strata_runtime *rt;
        struct strata_param p;
        struct rig r;

        attention_rig(&r);
        rt = rig_open(&r.cfg);
        for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
                cr_assert_eq(strata_parameter(rt, 0, i, &p), STRATA_OK);
                cr_assert_str_eq(p.name, names[i]);
        }
        cr_assert_eq(strata_parameter(rt, 0, 8, &p), STRATA_EINVAL, "8 groups");
        cr_assert_eq(strata_parameter(rt, 0, 1, &p), STRATA_OK);
        cr_assert_eq(p.group.shape[0], 3 * EMB);
        cr_assert_eq(p.group.shape[1], EMB);
        for (size_t i = 0; i < p.group.count; i++) {
                cr_assert_leq(fabsf(p.value[i]), bound);
                largest = fabsf(p.value[i]) > largest ? fabsf(p.value[i]) : largest;
        }
        cr_assert_geq(largest, 0.5f * bound, "drawn over the bound's range");
        cr_assert_eq(strata_parameter(rt, 0, 2, &p), STRATA_OK);
        for (size_t i = 0; i < p.group.count; i++)
                cr_assert(p.value[i] == 0.0f, "in_proj_bias 0");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The sequence modules compute on the host: refused on a device with memory of its own. */
Test(attention_parallel, refused_where_memory_is_the_devices)
{
        static const char *const want[] = { "module 0 (posembed) computes on the host",
                                            "module 1 (mha) computes on the host" };
        struct strata_plan_info pl;
        struct rig r;

        attention_rig(&r);
        r.cfg.device.driver = devsim_driver();
        for (int i = 0; i < 2; i++) {
                cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_ENOTSUP);
                cr_assert_not_null(strstr(strata_last_error(), want[i]), "%s",
                                   strata_last_error());
                r.mods[0] = (struct strata_module){ .ops = &strata_relu }; /* kernels */
        }
}

/* zero1, zero2 and fsdp on 2 devices are bitwise ddp on 2; dp on 2 is within 1e-5 of single. */
Test(attention_parallel, sharded_strategies_are_ddp_bits, .timeout = 120)
{
        static const enum strata_strategy_kind sharded[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
        };
        static float single[NP], ddp[NP], other[NP];
        struct rig r;

        attention_rig(&r);
        params_of(&r, single);
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        params_of(&r, ddp);
        for (size_t i = 0; i < sizeof(sharded) / sizeof(sharded[0]); i++) {
                r.cfg.strategy.kind = sharded[i];
                params_of(&r, other);
                cr_assert_eq(memcmp(other, ddp, sizeof(ddp)), 0, "%s on 2 is not ddp's bits",
                             strata_strategy_name(sharded[i]));
        }
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DP, 2, 0);
        params_of(&r, other);
        cr_assert_leq(rig_rel_diff(other, single, NP), 1e-5, "dp on 2: %g",
                      rig_rel_diff(other, single, NP));
}

/* Train STEPS, save, load into a fresh runtime, train STEPS more: the run that never stopped. */
Test(attention_parallel, a_checkpoint_resumes_bitwise, .timeout = 120)
{
        static float straight[NP], resumed[NP];
        char dir[] = "/tmp/strata-ckpt-attn-XXXXXX", path[128];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        attention_rig(&r);
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 2 * STEPS, NULL);
        gather(rt, &r.cfg, straight);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.ckpt", dir);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, STEPS, NULL);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        strata_loader_reset(&r.loader, r.idx, 256);
        for (int s = 0; s < 2 * STEPS; s++) {
                cr_assert(strata_loader_next(&r.loader, &b));
                if (s >= STEPS)
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                                     strata_last_error());
        }
        gather(rt, &r.cfg, resumed);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(memcmp(straight, resumed, sizeof(straight)), 0, "resumed run differs (%g)",
                     rig_rel_diff(resumed, straight, NP));
        unlink(path);
        rmdir(dir);
}

static void no_heap(enum strata_strategy_kind kind, int n, enum strata_precision prec,
                    int invariant)
{
        rig_no_heap(attention_rig, kind, n, prec, invariant);
}

Test(attention_parallel, no_heap_and_plan_is_used, .timeout = 120)
{
        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        no_heap(STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 0);
        no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 0);
        no_heap(STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_32, 0);
        no_heap(STRATA_STRATEGY_ZERO2, 2, STRATA_PRECISION_32, 0);
        no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_BF16_MIXED, 0);
        no_heap(STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_16_MIXED, 0);
        no_heap(STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 1);
}

Test(attention_parallel, pytorch_predicts_what_strata_predicts, .timeout = 120)
{
        static float out[RIG_BATCH * RIG_CLASSES];
        char dir[] = "/tmp/strata-export-attn-XXXXXX", st[128];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/model.safetensors", dir);
        attention_rig(&r);
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, STEPS, NULL);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx + 64, 64);
        cr_assert_eq(strata_loader_next(&r.loader, &b), 1);
        cr_assert_eq(strata_predict_step(rt, &b, out, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        rig_pytorch_script("load_attention_safetensors.py", st, b.x, RIG_IN, out, RIG_CLASSES,
                           b.rows);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(st);
        rmdir(dir);
}

/* The guide's ViT-style line (a patch embedding, one encoder block, a head) on 1 x 8 x 8. */
static const char vit_line[] =
        "input(1,8,8) conv2d(8,4,stride=4) tokens posembed "
        "rmsnorm(dims=1) mha(2,causal=1) add(from=2) "
        "rmsnorm(dims=1) tokens conv1d(16,1) gelu conv1d(8,1) tokens add(from=5) "
        "rmsnorm(dims=1) flatten linear(4)";

Test(attention_parallel, an_encoder_block_in_the_line_predicts_as_pytorch, .timeout = 120)
{
        static _Alignas(4096) unsigned char mem[1 << 18];
        static float out[RIG_BATCH * RIG_CLASSES];
        static struct strata_module mods[16];
        static uint32_t idx[256];
        char dir[] = "/tmp/strata-export-vit-XXXXXX", st[128];
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_model model = { 0 };
        struct strata_runtime *rt;
        struct strata_dataset ds;
        struct strata_loader ld;
        struct strata_arena a;
        struct strata_batch b;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        cr_assert_eq(strata_model_parse(vit_line, mods, 16, &model), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&ds, &a, 256, 64, RIG_CLASSES, 5), STRATA_OK);
        cr_assert_eq(strata_loader_init(&ld, &a, &ds, RIG_BATCH, 1), STRATA_OK);
        for (uint32_t i = 0; i < 256; i++)
                idx[i] = (i * 37u) % 256u;
        c.model = &model;
        c.batch = RIG_BATCH;
        c.classes = RIG_CLASSES;
        c.seed = 11;
        c.strategy.kind = STRATA_STRATEGY_DDP;
        c.strategy.devices = 2;
        rt = rig_open(&c);
        strata_loader_reset(&ld, idx, 256);
        for (int s = 0; s < STEPS && strata_loader_next(&ld, &b); s++)
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                             strata_last_error());
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/model.safetensors", dir);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&ld, idx + 64, 64);
        cr_assert_eq(strata_loader_next(&ld, &b), 1);
        cr_assert_eq(strata_predict_step(rt, &b, out, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        rig_pytorch_script("load_vit_safetensors.py", st, b.x, 64, out, RIG_CLASSES, b.rows);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(st);
        rmdir(dir);
}

/* ---- spawn: one process a device, as ddp's threads ---- */

static struct rig spawn_rig; /* set up by the parent: the children inherit it */

/*
 * A spawned process trains ddp over the processes; rank 0 returns its parameters. No
 * Criterion assertion here: a child's would be reported to the runner as the test's.
 */
static int attention_child(int rank, int size, void *arg)
{
        struct strata_config c = rig_cfg(&spawn_rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t np;

        (void)rank, (void)size, (void)arg;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&spawn_rig.loader, spawn_rig.idx, 256);
        for (int s = 0; s < STEPS; s++)
                if (!strata_loader_next(&spawn_rig.loader, &b) ||
                    strata_train_step(rt, &b, NULL) != STRATA_OK)
                        return 11;
        if (strata_parameters(rt, 0, &p, &np) || strata_spawn_return(p, NP * sizeof(*p)))
                return 12;
        return strata_teardown(rt) == STRATA_OK ? 0 : 13;
}

Test(attention_parallel, spawn_on_2_processes_is_ddp_on_2, .timeout = 60)
{
        static float ref[NP], got[NP];
        struct strata_spawn_result res;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (forks after threads: tests/strategy/processes.c)");
        attention_rig(&spawn_rig);
        cr_assert_eq(strata_spawn(2, attention_child, NULL, 20.0, got, sizeof(got), &res),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(res.failed_rank, -1);
        spawn_rig.cfg = rig_cfg(&spawn_rig, STRATA_STRATEGY_DDP, 2, 0);
        params_of(&spawn_rig, ref);
        cr_assert_eq(memcmp(ref, got, sizeof(ref)), 0, "spawn 2 != ddp 2");
}
