/*
 * The fp32 contract: a matrix of strategies and options trains on real Fashion-MNIST (a
 * 512-image subset, 8 steps, then a 256-image evaluation) and must reproduce, bit for bit,
 * the results recorded before the architecture change of issue 17 (commit 9041199): the
 * step losses, device 0's final parameters and optimizer state, the evaluation loss and
 * correct count, with every device's parameters equal to device 0's. A change in any of
 * these bits is a change of results. STRATA_MATRIX_RECORD=1 prints the table rows in this
 * file's syntax (for a deliberate, documented change of results).
 *
 * The rows are recorded per arithmetic of the GEMMs (decision 0034): every CPU kernel set
 * (libxsmm's AVX-512 and AVX2 kernels, the scalar set) computes an element as one chain of
 * fused multiply-adds per chunk of k, so one table, recorded once in portable mode, is the
 * reference of every set on every machine: the portable rows run everywhere and never skip
 * (a CPU without AVX2 runs them with the scalar set, the same bits), and the native rows
 * must give the same bits with the CPU's own kernels.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"

#define DATA "/usr/share/datasets/fashion-mnist"
#define TRAIN_N 512
#define TEST_N 256
#define BATCH 64
#define STEPS 8

enum model_kind { PLAIN, BN, DROPOUT };

struct row {
        const char *name;
        enum strata_strategy_kind strategy;
        int devices;
        enum model_kind model;
        int sync_bn, adamw, nesterov, accumulate;
        float clip_norm, clip_value;
        size_t bucket_bytes;
        uint64_t loss_hash, param_hash, opt_hash;
        uint64_t eval_loss_bits;
        int correct;
};

#define SGL STRATA_STRATEGY_SINGLE
#define DP STRATA_STRATEGY_DP
#define DDP STRATA_STRATEGY_DDP

#include "tests/strategy/results_matrix.inc"

/* The recorded table (one for every kernel set: see above). */
static const struct row *table(size_t *n)
{
        return *n = sizeof(fma_chain) / sizeof(fma_chain[0]), fma_chain;
}

/* The portable set, or on a CPU without AVX2 the scalar set (the same bits). */
static enum strata_kernels portable(void)
{
        return strata_kernel_set(STRATA_KERNELS_PORTABLE, STRATA_F32) ? STRATA_KERNELS_PORTABLE
                                                             : STRATA_KERNELS_SCALAR;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
        const unsigned char *b = p;

        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * 0x100000001b3ull;
        return h;
}

struct data {
        struct strata_arena arena;
        struct strata_dataset train, test;
        struct strata_loader loader, tloader;
        uint32_t idx[TRAIN_N], tidx[TEST_N];
};

static struct data *load(void)
{
        static struct data d;
        size_t a, b;

        cr_assert_eq(strata_dataset_bytes(DATA "/train-images-idx3-ubyte.gz",
                                          DATA "/train-labels-idx1-ubyte.gz", &a),
                     STRATA_OK, "Fashion-MNIST missing (make deps installs it): %s",
                     strata_last_error());
        cr_assert_eq(strata_dataset_bytes(DATA "/t10k-images-idx3-ubyte.gz",
                                          DATA "/t10k-labels-idx1-ubyte.gz", &b), STRATA_OK);
        cr_assert_eq(strata_arena_map(&d.arena, a + b + STRATA_MIB(4), NULL), STRATA_OK);
        cr_assert_eq(strata_dataset_load(&d.train, &d.arena, DATA "/train-images-idx3-ubyte.gz",
                                         DATA "/train-labels-idx1-ubyte.gz"), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_dataset_load(&d.test, &d.arena, DATA "/t10k-images-idx3-ubyte.gz",
                                         DATA "/t10k-labels-idx1-ubyte.gz"), STRATA_OK);
        cr_assert_eq(strata_loader_init(&d.loader, &d.arena, &d.train, BATCH, 1), STRATA_OK);
        cr_assert_eq(strata_loader_init(&d.tloader, &d.arena, &d.test, BATCH, 0), STRATA_OK);
        strata_loader_standardize(&d.loader, &d.train);
        strata_loader_standardize(&d.tloader, &d.train);
        for (uint32_t i = 0; i < TRAIN_N; i++)
                d.idx[i] = (i * 7919u) % 60000u;
        for (uint32_t i = 0; i < TEST_N; i++)
                d.tidx[i] = (i * 31u) % 10000u;
        return &d;
}

static void config(const struct row *r, enum strata_kernels kernels,
                   struct strata_module *mods, struct strata_model *m, struct strata_config *c)
{
        int n = 0;

        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = 32 };
        if (r->model == BN)
                mods[n++] = (struct strata_module){ .ops = &strata_batchnorm1d };
        mods[n++] = (struct strata_module){ .ops = &strata_relu };
        if (r->model == DROPOUT)
                mods[n++] = (struct strata_module){ .ops = &strata_dropout, .p = 0.2f };
        mods[n++] = (struct strata_module){ .ops = &strata_linear, .out = 10 };
        *m = (struct strata_model){ .in_features = 784, .nmodules = n, .modules = mods };
        *c = (struct strata_config)STRATA_CONFIG_INIT;
        c->model = m;
        c->batch = BATCH;
        c->classes = 10;
        c->seed = 5;
        c->strategy.kind = r->strategy;
        c->strategy.devices = r->devices;
        c->device.kernels = kernels;
        c->strategy.sync_bn = r->sync_bn;
        c->train.accumulate = r->accumulate;
        c->train.clip_norm = r->clip_norm;
        c->train.clip_value = r->clip_value;
        c->strategy.bucket_bytes = r->bucket_bytes;
        if (r->adamw) {
                c->optim.kind = STRATA_OPTIM_ADAMW;
                c->optim.lr = 2e-3f;
                c->optim.weight_decay = 0.01f;
        }
        if (r->nesterov) {
                c->optim.nesterov = 1;
                c->optim.weight_decay = 1e-3f;
        }
        if (r->strategy == DP && r->sync_bn)
                cr_assert_eq(strata_patch_replication_callback(c), STRATA_OK);
}

static void run_row(struct data *d, const struct row *r, enum strata_kernels kernels,
                    int record)
{
        struct strata_module mods[6];
        struct strata_model model;
        struct strata_config c;
        struct strata_runtime *rt = NULL;
        struct strata_metrics m, em = { 0 };
        struct strata_batch b;
        const float *p, *p0, *st;
        size_t n, n0, nst;
        uint64_t t, lh = 0xcbf29ce484222325ull, ph, oh, el;
        double eloss = 0.0;
        int correct = 0;

        config(r, kernels, mods, &model, &c);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s: %s", r->name, strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s: %s", r->name, strata_last_error());
        strata_loader_reset(&d->loader, d->idx, TRAIN_N);
        for (int s = 0; s < STEPS; s++) {
                cr_assert(strata_loader_next_indexed(&d->loader, &b));
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s: %s", r->name,
                             strata_last_error());
                lh = fnv(lh, &m.loss, sizeof(m.loss));
        }
        strata_loader_reset(&d->tloader, d->tidx, TEST_N);
        while (strata_loader_next_indexed(&d->tloader, &b)) {
                cr_assert_eq(strata_eval_step(rt, &b, &em), STRATA_OK, "%s", r->name);
                eloss += em.loss * em.rows;
                correct += em.correct;
        }
        cr_assert_eq(strata_parameters(rt, 0, &p0, &n0), STRATA_OK);
        ph = fnv(0xcbf29ce484222325ull, p0, n0 * sizeof(float));
        cr_assert_eq(strata_optimizer_state(rt, 0, &st, &nst, &t), STRATA_OK);
        oh = fnv(fnv(0xcbf29ce484222325ull, st, nst * sizeof(float)), &t, sizeof(t));
        for (int dev = 1; dev < r->devices; dev++) {
                cr_assert_eq(strata_parameters(rt, dev, &p, &n), STRATA_OK);
                cr_assert_eq(memcmp(p, p0, n * sizeof(float)), 0,
                             "%s: device %d's parameters differ from device 0's", r->name, dev);
        }
        memcpy(&el, &eloss, sizeof(el));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        if (record)
                fprintf(stderr, "        { \"%s\", %s, %d, %s, %d, %d, %d, %d, %#gf, %#gf, %zu, "
                                "0x%016llxull, 0x%016llxull, 0x%016llxull, 0x%016llxull, %d },\n",
                        r->name, r->strategy == SGL ? "SGL" : r->strategy == DP ? "DP" : "DDP",
                        r->devices, r->model == PLAIN ? "PLAIN" : r->model == BN ? "BN" : "DROPOUT",
                        r->sync_bn, r->adamw, r->nesterov, r->accumulate, (double)r->clip_norm,
                        (double)r->clip_value, r->bucket_bytes, (unsigned long long)lh,
                        (unsigned long long)ph, (unsigned long long)oh,
                        (unsigned long long)el, correct);
        cr_expect_eq(lh, r->loss_hash, "%s: step losses 0x%016llx, recorded 0x%016llx", r->name,
                     (unsigned long long)lh, (unsigned long long)r->loss_hash);
        cr_expect_eq(ph, r->param_hash, "%s: parameters 0x%016llx, recorded 0x%016llx", r->name,
                     (unsigned long long)ph, (unsigned long long)r->param_hash);
        cr_expect_eq(oh, r->opt_hash, "%s: optimizer state 0x%016llx, recorded 0x%016llx",
                     r->name, (unsigned long long)oh, (unsigned long long)r->opt_hash);
        cr_expect_eq(el, r->eval_loss_bits, "%s: eval loss %.17g, bits 0x%016llx, recorded "
                     "0x%016llx", r->name, eloss, (unsigned long long)el,
                     (unsigned long long)r->eval_loss_bits);
        cr_expect_eq(correct, r->correct, "%s: %d correct, recorded %d", r->name, correct,
                     r->correct);
}

static void run_strategy(enum strata_strategy_kind s, enum strata_kernels kernels)
{
        const char *rec = getenv("STRATA_MATRIX_RECORD");
        const struct row *rows;
        struct data *d;
        size_t nrows;
        int ran = 0;

        rows = table(&nrows);
        d = load();
        for (size_t i = 0; i < nrows; i++)
                if (rows[i].strategy == s) {
                        run_row(d, &rows[i], kernels, rec && *rec == '1');
                        ran++;
                }
        cr_assert_gt(ran, 0, "no row for strategy %d", (int)s);
        cr_assert_eq(strata_arena_release(&d->arena), STRATA_OK);
}

Test(results_matrix, single, .timeout = 120)
{
        run_strategy(SGL, STRATA_KERNELS_NATIVE);
}

Test(results_matrix, dp, .timeout = 120)
{
        run_strategy(DP, STRATA_KERNELS_NATIVE);
}

Test(results_matrix, ddp, .timeout = 120)
{
        run_strategy(DDP, STRATA_KERNELS_NATIVE);
}

Test(results_matrix, portable_single, .timeout = 120)
{
        run_strategy(SGL, portable());
}

Test(results_matrix, portable_dp, .timeout = 120)
{
        run_strategy(DP, portable());
}

Test(results_matrix, portable_ddp, .timeout = 120)
{
        run_strategy(DDP, portable());
}
