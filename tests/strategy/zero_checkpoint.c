/*
 * Checkpoints of the sharded strategies: zero1, zero2 and fsdp write ddp's consolidated format
 * (the devices' optimizer shards, and fsdp's parameter shards, side by side: every tensor byte
 * equal to ddp's file after the same steps); resuming at the same device count continues bit
 * for bit (losses, every device's parameters and optimizer shard); a zero2 checkpoint loads
 * into ddp and into zero1 on another device count and says it is resharded, an fsdp checkpoint
 * into ddp, and a ddp one into fsdp on another device count. Where every micro-batch is
 * reduced (accumulate_reduce each), zero2 and fsdp resume bit for bit too.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/idxfiles.h"
#include "tests/support/rig.h"

#define N 4
#define MAXP 2048

struct result {
        double loss[2 * N];
        float params[4][MAXP];
        float opt[4][2 * MAXP];
        size_t np, nopt;
        uint64_t t;
};

static int each; /* accumulate_reduce each (decision 0047) */

static struct strata_config config(struct rig *r, enum strata_strategy_kind kind, int devices)
{
        struct strata_config c;

        rig_init_full(r);
        r->mods[0].out = 40;
        c = rig_cfg(r, kind, devices, 0);
        c.device.bind = STRATA_BIND_NONE;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 2e-3f;
        c.train.accumulate = 2;
        c.train.clip_norm = 0.5f;
        c.train.accumulate_reduce = each ? STRATA_ACCUMULATE_REDUCE_EACH
                                         : STRATA_ACCUMULATE_REDUCE_WINDOW;
        return c;
}

/* Micro-batches [from, to) of the rig's data order. */
static void train(struct rig *r, struct strata_runtime *rt, int from, int to, struct result *o)
{
        struct strata_metrics m;
        struct strata_batch b;

        strata_loader_reset(&r->loader, r->idx, 256);
        for (int s = 0; s < to; s++) {
                cr_assert(strata_loader_next(&r->loader, &b));
                if (s < from)
                        continue;
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s",
                             strata_last_error());
                o->loss[s] = m.loss;
        }
}

/* Every device's parameters and optimizer state (its shard), then teardown. */
static void finish(struct strata_runtime *rt, int devices, struct result *o)
{
        const float *p;

        for (int d = 0; d < devices; d++) {
                cr_assert_eq(strata_parameters(rt, d, &p, &o->np), STRATA_OK);
                memcpy(o->params[d], p, o->np * sizeof(float));
                cr_assert_eq(strata_optimizer_state(rt, d, &p, &o->nopt, &o->t), STRATA_OK);
                cr_assert_leq(o->nopt, 2 * MAXP);
                memcpy(o->opt[d], p, o->nopt * sizeof(float));
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static const char *path_of(const char *name)
{
        static char dir[64], path[2][128];
        static int k;
        char *p = path[k++ & 1];

        if (!dir[0]) { /* removed when the test's process exits */
                const char *d = test_tmpdir();

                cr_assert_not_null(d);
                snprintf(dir, sizeof(dir), "%s", d);
        }
        snprintf(p, 128, "%s/%s", dir, name);
        return p;
}

/* Train N micro-batches under @p c and save to @p path. */
static void save_after(struct rig *r, const struct strata_config *c, const char *path)
{
        struct strata_runtime *rt = rig_open(c);
        static struct result scratch;

        train(r, rt, 0, N, &scratch);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void resume_bitwise(enum strata_strategy_kind kind, int devices)
{
        static struct result straight, resumed;
        const char *path = path_of("zero.ckpt");
        struct strata_ckpt_info info;
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;

        c = config(&r, kind, devices);
        memset(&straight, 0, sizeof(straight));
        memset(&resumed, 0, sizeof(resumed));
        rt = rig_open(&c);
        train(&r, rt, 0, 2 * N, &straight);
        finish(rt, devices, &straight);
        save_after(&r, &c, path);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert(info.bitwise);
        train(&r, rt, N, 2 * N, &resumed);
        finish(rt, devices, &resumed);
        cr_assert_eq(memcmp(straight.loss + N, resumed.loss + N, N * sizeof(double)), 0,
                     "%s: losses after the resume differ", strata_strategy_name(kind));
        cr_assert_eq(memcmp(straight.params, resumed.params, sizeof(straight.params)), 0);
        cr_assert_eq(memcmp(straight.opt, resumed.opt, sizeof(straight.opt)), 0,
                     "%s: optimizer shards differ after the resume", strata_strategy_name(kind));
        cr_assert_eq(straight.t, resumed.t);
}

Test(zero_checkpoint, zero1_resumes_bitwise, .timeout = 60)
{
        resume_bitwise(STRATA_STRATEGY_ZERO1, 3);
}

Test(zero_checkpoint, zero2_resumes_bitwise, .timeout = 60)
{
        resume_bitwise(STRATA_STRATEGY_ZERO2, 4);
}

/*
 * Every micro-batch reduced: a checkpoint at a window's end holds no gradients, so zero2 and
 * fsdp (their shard of the window's sum alone) resume bit for bit; inside a window the save is
 * refused, as in the window order, and the run goes on.
 */
Test(zero_checkpoint, each_resumes_bitwise_and_refuses_inside_a_window, .timeout = 60)
{
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_metrics m;
        struct strata_batch b;
        struct rig r;

        each = 1;
        resume_bitwise(STRATA_STRATEGY_ZERO2, 4);
        resume_bitwise(STRATA_STRATEGY_FSDP, 3);
        c = config(&r, STRATA_STRATEGY_ZERO2, 2);
        rt = rig_open(&c);
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, path_of("inside.ckpt"), NULL, 0),
                     STRATA_EBADSTATE);
        cr_assert(strstr(strata_last_error(), "inside an accumulation window"), "%s",
                  strata_last_error());
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_save_checkpoint(rt, path_of("inside.ckpt"), NULL, 0), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        each = 0;
}

Test(zero_checkpoint, fsdp_resumes_bitwise, .timeout = 60)
{
        resume_bitwise(STRATA_STRATEGY_FSDP, 4);
        resume_bitwise(STRATA_STRATEGY_FSDP, 1);
}

/* A sharded strategy's file is ddp's after the same steps, but for the strategy's name. */
static void consolidated_as_ddp(enum strata_strategy_kind kind)
{
        static unsigned char a[1 << 16], b[1 << 16];
        const char *pz = path_of("zero.ckpt"), *pd = path_of("ddp.ckpt");
        struct strata_config c;
        struct rig r;
        long na, nb;

        c = config(&r, kind, 3);
        save_after(&r, &c, pz);
        c = config(&r, STRATA_STRATEGY_DDP, 3);
        save_after(&r, &c, pd);
        na = cli_slurp(pz, a, sizeof(a));
        nb = cli_slurp(pd, b, sizeof(b));
        cr_assert_eq(na, nb);
        cr_assert_lt(na, (long)sizeof(a));
        /* the header names the strategy; the table and every tensor are ddp's bytes */
        cr_assert_eq(memcmp(a + sizeof(struct strata__ckpt_header),
                            b + sizeof(struct strata__ckpt_header),
                            (size_t)na - sizeof(struct strata__ckpt_header)), 0,
                     "%s", strata_strategy_name(kind));
}

Test(zero_checkpoint, consolidated_as_ddp, .timeout = 60)
{
        consolidated_as_ddp(STRATA_STRATEGY_ZERO2);
        consolidated_as_ddp(STRATA_STRATEGY_FSDP);
}

/* A zero2 checkpoint continues under ddp (same devices: ddp's steps) and zero1 on 2. */
Test(zero_checkpoint, loads_into_other_strategies, .timeout = 60)
{
        static struct result viaz, viad;
        const char *path = path_of("zero2.ckpt");
        struct strata_ckpt_info info;
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;

        c = config(&r, STRATA_STRATEGY_ZERO2, 3);
        save_after(&r, &c, path);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK);
        train(&r, rt, N, 2 * N, &viaz);
        finish(rt, 3, &viaz);
        c = config(&r, STRATA_STRATEGY_DDP, 3);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.bitwise, 0, "another strategy: resharded");
        train(&r, rt, N, 2 * N, &viad);
        finish(rt, 3, &viad);
        cr_assert_eq(memcmp(viaz.params, viad.params, sizeof(viaz.params)), 0,
                     "ddp from a zero2 checkpoint continues as zero2 would");
        c = config(&r, STRATA_STRATEGY_ZERO1, 2);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.bitwise, 0);
        cr_assert_eq(info.world, 3);
        train(&r, rt, N, N + 2, &viad);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * @p path loaded into a fresh @p kind on @p devices (said: another world, or resharded), which
 * trains micro-batches [N, 2N) into @p o; the runtime stays open.
 */
static struct strata_runtime *continue_from(struct rig *r, const char *path,
                                            enum strata_strategy_kind kind, int devices,
                                            int world, struct result *o)
{
        struct strata_config c = config(r, kind, devices);
        struct strata_runtime *rt = rig_open(&c);
        struct strata_ckpt_info info;

        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.world, world);
        cr_assert_eq(info.bitwise, 0, "%s: another strategy or world", strata_strategy_name(kind));
        train(r, rt, N, 2 * N, o);
        return rt;
}

/*
 * An fsdp checkpoint continues under ddp as fsdp would (the same losses: fsdp is ddp, bit for
 * bit), and a ddp checkpoint continues under fsdp on another device count as ddp does there,
 * each device taking its shard of the consolidated parameters.
 */
Test(zero_checkpoint, fsdp_loads_into_ddp_and_back, .timeout = 60)
{
        static struct result straight, viad, viaf;
        static struct rig r0;
        const char *path = path_of("fsdp.ckpt");
        struct strata_runtime *rt;
        struct strata_config c = config(&r0, STRATA_STRATEGY_FSDP, 3);

        memset(&straight, 0, sizeof(straight));
        rt = rig_open(&c);
        train(&r0, rt, 0, 2 * N, &straight);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        save_after(&r0, &c, path);
        rt = continue_from(&r0, path, STRATA_STRATEGY_DDP, 3, 3, &viad);
        cr_assert_eq(memcmp(straight.loss + N, viad.loss + N, N * sizeof(double)), 0,
                     "ddp from an fsdp checkpoint continues as fsdp does");
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(strata_teardown(continue_from(&r0, path, STRATA_STRATEGY_DDP, 2, 3, &viad)),
                     STRATA_OK);
        cr_assert_eq(strata_teardown(continue_from(&r0, path, STRATA_STRATEGY_FSDP, 2, 3, &viaf)),
                     STRATA_OK);
        cr_assert_eq(memcmp(viaf.loss + N, viad.loss + N, N * sizeof(double)), 0,
                     "fsdp on 2 devices from a ddp checkpoint of 3 continues as ddp on 2");
}
