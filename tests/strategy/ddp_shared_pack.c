/*
 * ddp's devices pack each Linear's weight once a step for all of them (decision 0106): under
 * the split step each device packs its part of W^T into one copy in replica 0's gradient of
 * that layer, the devices meet, and each one's GEMM reads the copy. The parameters after
 * several steps are bitwise those of every device packing its own (the test knob), on 2 and 3
 * devices, with SyncBatchNorm, over a last batch of one row (the other devices get none), for
 * a model whose shared layers are split unevenly (200 outputs: panels of 64, 64, 64 and 8;
 * 608 inputs: chunks of k of 256, 256 and 96) beside a layer whose copy does not fit its
 * gradient and a narrow one (neither shares). The shared path is taken (a counter: two layers
 * a device a step), and not where nothing may share: one device, eval steps, invariant mode,
 * devices taking turns on a core (unless the knob forces it, so 3 devices share here too).
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "strata/strata.h"
#include "nn/replica.h"
#include "strategy/multi.h"

#define IN 608
#define CLASSES 10
#define BATCH 32
#define ROWS (2 * BATCH + 1) /* the epoch's last batch: one row */
#define EPOCHS 2
#define STEPS (EPOCHS * 3)
#define NP_MAX (IN * 200 + 200 + 200 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10 + 2 * 200)

static _Alignas(4096) unsigned char data_mem[1 << 20];

struct net {
        struct strata_module mods[8];
        struct strata_model model;
        struct strata_dataset ds;
        struct strata_loader loader;
        struct strata_arena data;
        uint32_t idx[ROWS];
};

/* 608-200(-bn)-relu-128-relu-64-relu-10: layers 0 and 4 share (the 128 one does not fit). */
static void net_init(struct net *n, int bn)
{
        static const int outs[] = { 200, 0, 128, 0, 64, 0, CLASSES };
        int k = 0;

        memset(n, 0, sizeof(*n));
        for (int i = 0; i < 7; i++) {
                n->mods[k++] = (struct strata_module){ .ops = outs[i] ? &strata_linear
                                                                      : &strata_relu,
                                                       .out = outs[i] };
                if (i == 0 && bn)
                        n->mods[k++] = (struct strata_module){ .ops = &strata_batchnorm1d };
        }
        n->model = (struct strata_model){ .in_features = IN, .nmodules = k, .modules = n->mods };
        cr_assert_eq(strata_arena_init(&n->data, data_mem, sizeof(data_mem), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_synthetic(&n->ds, &n->data, ROWS, IN, CLASSES, 3),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_loader_init(&n->loader, &n->data, &n->ds, BATCH, 0), STRATA_OK);
        for (uint32_t i = 0; i < ROWS; i++)
                n->idx[i] = (i * 29u) % ROWS;
}

static struct strata_config net_cfg(struct net *n, int devices, int sync_bn)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &n->model;
        c.batch = BATCH;
        c.classes = CLASSES;
        c.seed = 5;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 0.01f;
        c.strategy.kind = devices > 1 ? STRATA_STRATEGY_DDP : STRATA_STRATEGY_SINGLE;
        c.strategy.devices = devices;
        c.strategy.sync_bn = sync_bn;
        return c;
}

/* Whether two of @p rt's devices take turns on a core (nothing is shared then). */
static int crowded(const struct strata_runtime *rt)
{
        const struct strata__multi *m = strata__multi(rt);

        for (int d = 0; m->workers && d < rt->nreplicas; d++)
                if (strata__workers_placement(m->workers, d)->shared)
                        return 1;
        return 0;
}

/*
 * Train EPOCHS epochs (and evaluate a batch); the parameters into @p out; shared packs made
 * (*@p turns: the devices take turns on a core).
 */
static uint64_t train(struct net *n, const struct strata_config *c, int unshared, float *out,
                      size_t *np, int *turns)
{
        struct strata_runtime *rt = NULL;
        struct strata_batch b;
        const float *p;
        uint64_t before, evals;

        strata__packed_unshared = unshared;
        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        before = atomic_load(&strata__packed_shared);
        *turns = crowded(rt);
        for (int e = 0, steps = 0; e < EPOCHS; e++) {
                cr_assert_eq(strata_loader_reset(&n->loader, n->idx, ROWS), STRATA_OK);
                while (strata_loader_next(&n->loader, &b) > 0) {
                        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s",
                                     strata_last_error());
                        steps++;
                }
                cr_assert_eq(steps, (e + 1) * 3, "a last batch of one row each epoch");
        }
        evals = atomic_load(&strata__packed_shared);
        cr_assert_eq(strata_loader_reset(&n->loader, n->idx, ROWS), STRATA_OK);
        cr_assert(strata_loader_next(&n->loader, &b) > 0);
        cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(atomic_load(&strata__packed_shared), evals, "an eval step shares nothing");
        cr_assert_eq(strata_parameters(rt, 0, &p, np), STRATA_OK);
        cr_assert_leq(*np, (size_t)NP_MAX);
        memcpy(out, p, *np * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        strata__packed_unshared = 0;
        return evals - before;
}

/*
 * Shared (@p force: also where the devices take turns on a core) against each device's own
 * packing: the same parameters; the shared packs counted.
 */
static void same_bits(int devices, int bn, int force)
{
        static float shared[NP_MAX], own[NP_MAX];
        struct strata_config c;
        struct net n;
        size_t np, np2;
        uint64_t packs;
        int turns;

        net_init(&n, bn);
        c = net_cfg(&n, devices, bn);
        packs = train(&n, &c, force ? -1 : 0, shared, &np, &turns);
        cr_assert_eq(train(&n, &c, 1, own, &np2, &turns), 0, "the knob packs every weight alone");
        cr_assert_eq(np, np2);
        cr_assert_eq(memcmp(shared, own, np * sizeof(float)), 0,
                     "%d devices%s: the shared copy changed the parameters", devices,
                     bn ? ", sync-bn" : "");
        if (turns && !force) { /* more devices than this process's cores */
                cr_assert_eq(packs, 0, "%d devices taking turns on a core share", devices);
                return;
        }
        cr_assert_eq(packs, (uint64_t)STEPS * (uint64_t)devices * 2u,
                     "%d devices: layers 0 and 4 share, every device, every step", devices);
}

Test(ddp_shared_pack, two_devices_same_bits, .timeout = 120)
{
        same_bits(2, 0, 0);
}

/* Three parts of each copy (shared also where the machine has fewer cores: the test knob). */
Test(ddp_shared_pack, three_devices_same_bits, .timeout = 120)
{
        same_bits(3, 0, 0);
        same_bits(3, 0, 1);
}

Test(ddp_shared_pack, sync_batchnorm_same_bits, .timeout = 120)
{
        same_bits(2, 1, 0);
        same_bits(3, 1, 1);
}

/* One device, and invariant mode on two (its chunks' calls), pack their own weights. */
Test(ddp_shared_pack, nothing_shares_where_it_may_not, .timeout = 120)
{
        static float out[NP_MAX];
        struct strata_config c;
        struct net n;
        size_t np;
        int turns;

        net_init(&n, 0);
        c = net_cfg(&n, 1, 0);
        cr_assert_eq(train(&n, &c, 0, out, &np, &turns), 0, "one device");
        c = net_cfg(&n, 2, 0);
        c.strategy.invariant = 1;
        c.strategy.chunks = 2;
        cr_assert_eq(train(&n, &c, 0, out, &np, &turns), 0, "invariant mode");
}
