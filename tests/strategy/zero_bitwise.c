/*
 * zero1, zero2 and fsdp are ddp, bit for bit: the results matrix's configurations (SGD with
 * momentum and Nesterov, AdamW, BatchNorm with and without SyncBatchNorm, dropout,
 * accumulation, clipping by norm and by value, two buckets) and mixed precision (bf16-mixed;
 * 16-mixed with the loss scaler's skips, natural and injected) train under ddp, zero1, zero2
 * and fsdp on 1 to 4 devices (threads may share cores) and must give the same step losses,
 * the same evaluation, the same parameters on every device (fsdp: the devices' parameter
 * shards side by side), and the same optimizer state (the devices' shards side by side, read
 * through the parameter walk, each element owned once). Every device's arena is used exactly
 * as planned. Where every micro-batch is reduced (accumulate_reduce each), zero1, zero2 (its
 * shard of the window's sum alone), fsdp, dp and single give ddp's bits in that mode.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "strategy/internal.h"
#include "strategy/internal.h"
#include "tests/support/rig.h"

#define STEPS 8
#define NP_MAX 2048

/* DEEP*: four linear layers of similar size, where zero2 shards its reduced gradients (the
 * largest layer and one shard are fewer floats than the whole vector from 2 devices). */
enum model_kind { PLAIN, BN, FULL, DEEP, DEEP_BN, DEEP_DROPOUT };

struct conf {
        const char *name;
        enum model_kind model;
        int sync_bn, adamw, nesterov, accumulate;
        float clip_norm, clip_value;
        size_t bucket_bytes;
        enum strata_precision precision;
        float loss_scale_init;
        int inject; /* a device's gradients count as non-finite at step 3 */
        enum strata_dtype grad_comm;
        int each; /* accumulate_reduce each: every micro-batch reduced (decision 0047) */
};

static const struct conf confs[] = {
        { "plain", PLAIN, 0, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "bn", BN, 0, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "bn-sync", BN, 1, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "full-dropout", FULL, 0, 0, 0, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "adamw", PLAIN, 0, 1, 0, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "nesterov", PLAIN, 0, 0, 1, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "accumulate2", PLAIN, 0, 0, 0, 2, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "clipnorm", PLAIN, 0, 0, 0, 0, 0.5f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "clipvalue", PLAIN, 0, 0, 0, 0, 0.0f, 0.01f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "bn-sync-buckets", BN, 1, 0, 0, 0, 0.0f, 0.0f, 256, 0, 0.0f, 0, STRATA_F32, 0 },
        { "adamw-acc3-clipnorm-buckets", FULL, 0, 1, 0, 3, 0.05f, 0.0f, 512, 0, 0.0f, 0,
          STRATA_F32, 0 },
        { "bf16-mixed-adamw", BN, 1, 1, 0, 0, 0.5f, 0.0f, 0,
          STRATA_PRECISION_BF16_MIXED, 0.0f, 0, STRATA_F32, 0 },
        { "16-mixed-overflow", PLAIN, 0, 0, 0, 0, 0.0f, 0.0f, 0,
          STRATA_PRECISION_16_MIXED, 0x1p40f, 0, STRATA_F32, 0 },
        { "16-mixed-injected-clip", FULL, 0, 1, 0, 2, 0.5f, 0.02f, 512,
          STRATA_PRECISION_16_MIXED, 0.0f, 1, STRATA_F32, 0 },
        { "grad-allreduce-bf16", PLAIN, 0, 1, 0, 0, 0.5f, 0.0f, 0, 0, 0.0f, 0, STRATA_BF16, 0 },
        { "deep", DEEP, 0, 0, 1, 0, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "deep-bn-sync-adamw", DEEP_BN, 1, 1, 0, 0, 0.0f, 0.02f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "deep-dropout-bf16-mixed", DEEP_DROPOUT, 0, 1, 0, 0, 0.0f, 0.0f, 0,
          STRATA_PRECISION_BF16_MIXED, 0.0f, 0, STRATA_F32, 0 },
        { "deep-16-mixed-injected", DEEP, 0, 1, 0, 0, 0.0f, 0.02f, 0,
          STRATA_PRECISION_16_MIXED, 0.0f, 1, STRATA_F32, 0 },
        /* zero2 sums the squares shard after shard (own_grads); with accumulation it
         * keeps the whole vector and gathers the shards (decision 0036) */
        { "deep-clipnorm", DEEP, 0, 0, 1, 0, 0.05f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 0 },
        { "deep-adamw-clipnorm-clipvalue", DEEP, 0, 1, 0, 0, 0.5f, 0.01f, 0, 0, 0.0f, 0,
          STRATA_F32, 0 },
        { "deep-bn-sync-acc2-clipnorm", DEEP_BN, 1, 1, 0, 2, 0.05f, 0.0f, 0, 0, 0.0f, 0,
          STRATA_F32, 0 },
        { "deep-16-mixed-injected-clipnorm", DEEP, 0, 1, 0, 0, 0.05f, 0.0f, 0,
          STRATA_PRECISION_16_MIXED, 0.0f, 1, STRATA_F32, 0 },
};

/*
 * accumulate_reduce each: every strategy reduces every micro-batch and adds the reduced
 * gradients in micro-batch order, and zero2 and fsdp keep their shard of the window's sum
 * alone (zero2 from 2 devices on any model), with clipping by norm too (the owners' running
 * sum of squares). dp and, on one device, single must give ddp's bits as well.
 */
static const struct conf each_confs[] = {
        { "each-acc2", PLAIN, 0, 0, 0, 2, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32, 1 },
        { "each-deep-nesterov-acc3", DEEP, 0, 0, 1, 3, 0.0f, 0.0f, 0, 0, 0.0f, 0, STRATA_F32,
          1 },
        { "each-deep-adamw-acc2-clipnorm", DEEP, 0, 1, 0, 2, 0.05f, 0.0f, 0, 0, 0.0f, 0,
          STRATA_F32, 1 },
        { "each-deep-bn-sync-adamw-acc3-clipnorm-clipvalue", DEEP_BN, 1, 1, 0, 3, 0.05f, 0.01f,
          0, 0, 0.0f, 0, STRATA_F32, 1 },
        { "each-adamw-acc3-clipnorm-buckets", FULL, 0, 1, 0, 3, 0.05f, 0.0f, 512, 0, 0.0f, 0,
          STRATA_F32, 1 },
        { "each-deep-dropout-bf16-mixed-acc2", DEEP_DROPOUT, 0, 1, 0, 2, 0.5f, 0.0f, 0,
          STRATA_PRECISION_BF16_MIXED, 0.0f, 0, STRATA_F32, 1 },
        { "each-16-mixed-injected-acc2-clipnorm", DEEP, 0, 1, 0, 2, 0.05f, 0.02f, 0,
          STRATA_PRECISION_16_MIXED, 0.0f, 1, STRATA_F32, 1 },
        { "each-grad-allreduce-bf16-acc2", PLAIN, 0, 1, 0, 2, 0.5f, 0.0f, 0, 0, 0.0f, 0,
          STRATA_BF16, 1 },
};

struct result {
        double loss[STEPS], eval_loss;
        int eval_correct;
        float params[4][NP_MAX];
        float opt[2 * NP_MAX];
        uint64_t opt_t;
        size_t np;
};

/* 20-16-(relu | bn | bn, dropout)-16-relu-16-4: layers of 336, 272, 272 and 68 parameters. */
static void deep(struct rig *r, enum model_kind kind)
{
        static const struct strata_module_ops *second[] = { [DEEP] = &strata_relu,
                                                            [DEEP_BN] = &strata_batchnorm1d,
                                                            [DEEP_DROPOUT] = &strata_dropout };

        rig_init(r, 0);
        r->mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        r->mods[1] = (struct strata_module){ .ops = second[kind],
                                             .p = kind == DEEP_DROPOUT ? 0.25f : 0.0f };
        r->mods[2] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        r->mods[3] = (struct strata_module){ .ops = &strata_relu };
        r->mods[4] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        r->mods[5] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model.nmodules = 6;
}

static void configure(struct rig *r, const struct conf *k, enum strata_strategy_kind kind,
                      int devices, struct strata_config *c)
{
        if (k->model >= DEEP)
                deep(r, k->model);
        else if (k->model == FULL)
                rig_init_full(r);
        else
                rig_init(r, k->model == BN);
        if (k->model < DEEP)
                r->mods[0].out = 48; /* shards that cut through the first layer's weights */
        *c = rig_cfg(r, kind, devices, k->sync_bn);
        c->device.bind = STRATA_BIND_NONE; /* more devices than this machine's cores */
        c->train.accumulate = k->accumulate;
        c->train.clip_norm = k->clip_norm;
        c->train.clip_value = k->clip_value;
        c->train.accumulate_reduce = k->each ? STRATA_ACCUMULATE_REDUCE_EACH
                                             : STRATA_ACCUMULATE_REDUCE_WINDOW;
        c->strategy.bucket_bytes = k->bucket_bytes;
        c->strategy.grad_allreduce = kind == STRATA_STRATEGY_ZERO2 || kind == STRATA_STRATEGY_FSDP
                                             ? STRATA_F32
                                             : k->grad_comm;
        c->precision.kind = k->precision;
        if (k->loss_scale_init > 0.0f)
                c->precision.loss_scale_init = k->loss_scale_init;
        if (k->adamw) {
                c->optim.kind = STRATA_OPTIM_ADAMW;
                c->optim.lr = 2e-3f;
                c->optim.weight_decay = 0.01f;
        }
        if (k->nesterov) {
                c->optim.nesterov = 1;
                c->optim.weight_decay = 1e-3f;
        }
}

/*
 * The optimizer state of every trained group, from the devices that own each element; with
 * @p values (fsdp) the parameters too, as every device's.
 */
static void consolidate(struct strata_runtime *rt, int devices, int values, struct result *out)
{
        static unsigned char owned[NP_MAX];
        struct strata_param p;
        int n;

        memset(owned, 0, sizeof(owned));
        cr_assert_eq(strata_parameter_count(rt, &n), STRATA_OK);
        for (int d = 0; d < devices; d++)
                for (int g = 0; g < n; g++) {
                        cr_assert_eq(strata_parameter(rt, d, g, &p), STRATA_OK);
                        if (!p.grad)
                                continue;
                        cr_assert_leq(p.shard_lo, p.shard_hi);
                        for (size_t i = p.shard_lo; i < p.shard_hi; i++)
                                owned[p.offset + i]++;
                        for (int j = 0; j < p.opt_slots && p.shard_hi > p.shard_lo; j++)
                                memcpy(out->opt + out->np * (size_t)j + p.offset + p.shard_lo,
                                       p.opt_state[j], (p.shard_hi - p.shard_lo) * sizeof(float));
                        for (int e = 0; values && e < devices; e++)
                                memcpy(out->params[e] + p.offset + p.shard_lo, p.value,
                                       (p.shard_hi - p.shard_lo) * sizeof(float));
                }
        for (size_t i = 0; i < out->np; i++)
                cr_assert_eq(owned[i], 1, "element %zu owned by %d devices", i, owned[i]);
}

/* Each device's arena is used to the byte as planned, and the region as a whole. */
static void check_plan(struct strata_runtime *rt, const struct strata_config *c)
{
        struct strata_plan_info pl;
        struct strata_memory_info mi;

        cr_assert_eq(strata_plan(c, &pl), STRATA_OK);
        for (int d = 0; d < rt->nreplicas; d++) {
                size_t used = strata_arena_used(strata__replica_arena(strata__rep(rt, d)));

                cr_assert_eq(used, pl.per_device, "device %d used %zu bytes, planned %zu", d,
                             used, pl.per_device);
        }
        cr_assert_eq(strata_memory(rt, &mi), STRATA_OK);
        cr_assert_eq(mi.used, mi.planned);
        cr_assert_eq(mi.refusals, 0);
}

static void run(const struct conf *k, enum strata_strategy_kind kind, int devices,
                struct result *out)
{
        struct strata_runtime *rt;
        struct strata_metrics m;
        struct strata_batch b;
        struct strata_config c;
        struct rig r;
        const float *p;
        int micro = k->accumulate > 1 ? k->accumulate : 1, fsdp = kind == STRATA_STRATEGY_FSDP;
        size_t n = 0;

        configure(&r, k, kind, devices, &c);
        rt = rig_open(&c);
        /* zero2 shards its reduced gradients exactly where they take fewer floats, with
         * clipping by norm too; accumulation keeps the whole vector (decision 0036) unless
         * every micro-batch is reduced (0047) */
        if (kind == STRATA_STRATEGY_ZERO2)
                cr_assert_eq(strata__shard_own_grads(strata__rep_shard(rt, 0)),
                             devices > 1 && (k->each || (k->model >= DEEP && micro == 1)),
                             "%s", k->name);
        cr_assert_eq(strata__shard_each(strata__rep_shard(rt, 0)), k->each, "%s", k->name);
        strata_loader_reset(&r.loader, r.idx, 256);
        for (int s = 0; s < STEPS; s++) {
                if (k->inject && s == 3 * micro - 1)
                        cr_assert_eq(strata__inject_nonfinite_grad(rt, devices - 1), STRATA_OK);
                cr_assert(strata_loader_next(&r.loader, &b));
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s: %s", k->name,
                             strata_last_error());
                out->loss[s] = m.loss;
        }
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
        out->eval_loss = m.loss;
        out->eval_correct = m.correct;
        for (int d = 0; d < devices; d++) {
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                out->np = fsdp ? strata__repv(rt, 0)->nparam : n; /* fsdp: the shard */
                cr_assert_leq(out->np, NP_MAX);
                cr_assert_leq(n, out->np);
                memcpy(out->params[d], p, n * sizeof(float));
        }
        out->opt_t = strata__replica_steps(strata__rep(rt, 0));
        /* ddp, dp, single: every device holds the whole state (dp: the master's) */
        consolidate(rt, strata__caps(rt->strategy) & STRATA__CAP_SHARD_STATE ? devices : 1,
                    fsdp, out);
        check_plan(rt, &c);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void same(const struct conf *k, const char *what, int devices, const struct result *a,
                 const struct result *b)
{
        cr_assert_eq(a->np, b->np);
        cr_assert_eq(memcmp(a->loss, b->loss, sizeof(a->loss)), 0, "%s, %s, %d devices: step "
                     "losses differ from ddp's", k->name, what, devices);
        cr_assert_eq(memcmp(&a->eval_loss, &b->eval_loss, sizeof(double)), 0,
                     "%s, %s, %d devices: evaluation loss", k->name, what, devices);
        cr_assert_eq(a->eval_correct, b->eval_correct);
        for (int d = 0; d < devices; d++)
                cr_assert_eq(memcmp(a->params[d], b->params[0], a->np * sizeof(float)), 0,
                             "%s, %s, %d devices: device %d's parameters differ from ddp's",
                             k->name, what, devices, d);
        cr_assert_eq(memcmp(a->opt, b->opt, sizeof(a->opt)), 0, "%s, %s, %d devices: "
                     "optimizer state differs from ddp's", k->name, what, devices);
        cr_assert_eq(a->opt_t, b->opt_t);
}

static void matrix(int devices)
{
        static struct result ddp, z;

        for (size_t i = 0; i < sizeof(confs) / sizeof(confs[0]); i++) {
                memset(&ddp, 0, sizeof(ddp));
                run(&confs[i], STRATA_STRATEGY_DDP, devices, &ddp);
                memset(&z, 0, sizeof(z));
                run(&confs[i], STRATA_STRATEGY_ZERO1, devices, &z);
                same(&confs[i], "zero1", devices, &z, &ddp);
                if (confs[i].grad_comm != STRATA_F32)
                        continue; /* zero2 reduces its buckets in f32 */
                memset(&z, 0, sizeof(z));
                run(&confs[i], STRATA_STRATEGY_ZERO2, devices, &z);
                same(&confs[i], "zero2", devices, &z, &ddp);
                memset(&z, 0, sizeof(z));
                run(&confs[i], STRATA_STRATEGY_FSDP, devices, &z);
                same(&confs[i], "fsdp", devices, &z, &ddp);
        }
}

/*
 * accumulate_reduce each on @p devices: zero1, zero2, fsdp and dp (and single on one device)
 * against ddp, all reducing every micro-batch; and ddp's bits differ from the window order's
 * (the option changes the sums, so the comparison above could fail): on 2 or more devices in
 * every configuration, on one in some.
 */
static void matrix_each(int devices)
{
        static struct result ddp, z;
        int differ = 0;
        static const enum strata_strategy_kind others[] = {
                STRATA_STRATEGY_ZERO1, STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_FSDP,
                STRATA_STRATEGY_DP, STRATA_STRATEGY_SINGLE };

        for (size_t i = 0; i < sizeof(each_confs) / sizeof(each_confs[0]); i++) {
                const struct conf *k = &each_confs[i];
                struct conf window = *k;

                memset(&ddp, 0, sizeof(ddp));
                run(k, STRATA_STRATEGY_DDP, devices, &ddp);
                for (size_t j = 0; j < sizeof(others) / sizeof(others[0]); j++) {
                        enum strata_strategy_kind kind = others[j];

                        if ((kind == STRATA_STRATEGY_SINGLE && devices > 1) ||
                            (k->grad_comm != STRATA_F32 && kind != STRATA_STRATEGY_ZERO1) ||
                            (kind == STRATA_STRATEGY_DP && k->sync_bn))
                                continue; /* f32 reductions; dp's SyncBatchNorm: callbacks */
                        memset(&z, 0, sizeof(z));
                        run(k, kind, devices, &z);
                        same(k, strata_strategy_name(kind), devices, &z, &ddp);
                }
                window.each = 0;
                memset(&z, 0, sizeof(z));
                run(&window, STRATA_STRATEGY_DDP, devices, &z);
                differ += memcmp(z.params[0], ddp.params[0], z.np * sizeof(float)) != 0;
        }
        /* on one device a GEMM that adds its product to C with one rounding may coincide */
        cr_assert_geq(differ, devices > 1 ? (int)(sizeof(each_confs) / sizeof(each_confs[0]))
                                          : 1, "%d devices: each gave window's bits", devices);
}

Test(zero_bitwise, one_device, .timeout = 120)
{
        matrix(1);
        matrix_each(1);
}

Test(zero_bitwise, two_devices, .timeout = 120)
{
        matrix(2);
        matrix_each(2);
}

Test(zero_bitwise, three_devices, .timeout = 120)
{
        matrix(3);
        matrix_each(3);
}

Test(zero_bitwise, four_devices, .timeout = 120)
{
        matrix(4);
        matrix_each(4);
}
