/*
 * Strata from plain C, one process, no MPI: train a small MLP on synthetic data with ddp on 2
 * devices, in a memory region the program owns (sized by strata_plan(), aligned to its
 * plan.align), and check that the loss falls. Built and run by `make test`
 * (tests/build/examples.sh) with cc -std=c11 -Wall -Wextra -Werror and pkg-config:
 *   cc -std=c11 -o train train.c $(pkg-config --cflags --libs strata)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <strata/strata.h>

static _Alignas(64) unsigned char data_mem[1 << 20];

/* The data set, 1024 synthetic samples of 20 features and 4 classes, and its loader. */
static int data(struct strata_arena *a, struct strata_dataset *ds, struct strata_loader *l)
{
        if (strata_arena_init(a, data_mem, sizeof(data_mem), NULL) != STRATA_OK ||
            strata_dataset_synthetic(ds, a, 1024, 20, 4, 5) != STRATA_OK ||
            strata_loader_init(l, a, ds, 64, 1) != STRATA_OK) {
                fprintf(stderr, "data: %s\n", strata_last_error());
                return 1;
        }
        return 0;
}

/* One epoch over @p idx: the mean training loss into *loss. */
static int epoch(struct strata_runtime *rt, struct strata_loader *l, const uint32_t *idx,
                 double *loss)
{
        struct strata_batch b;
        struct strata_metrics m;
        double sum = 0.0;
        int n = 0;

        strata_loader_reset(l, idx, 1024);
        while (strata_loader_next(l, &b) > 0) {
                if (strata_train_step(rt, &b, &m) != STRATA_OK) {
                        fprintf(stderr, "step: %s\n", strata_last_error());
                        return 1;
                }
                sum += m.loss;
                n++;
        }
        *loss = sum / n;
        return 0;
}

int main(void)
{
        struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 32 },
                { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model model = { .in_features = 20, .nmodules = 3, .modules = mods };
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct strata_runtime *rt = NULL;
        struct strata_arena arena;
        struct strata_dataset ds;
        struct strata_loader loader;
        static uint32_t idx[1024];
        double first = 0.0, last = 0.0;
        void *region;

        if (data(&arena, &ds, &loader))
                return 1;
        for (uint32_t i = 0; i < 1024; i++)
                idx[i] = i;
        cfg.model = &model;
        cfg.batch = 64;
        cfg.classes = 4;
        cfg.strategy.kind = STRATA_STRATEGY_DDP;
        cfg.strategy.devices = 2;
        /* The region the runtime lives in: plan.bytes, at an address aligned to plan.align
         * (malloc's alignment is not enough). */
        if (strata_plan(&cfg, &plan) != STRATA_OK) {
                fprintf(stderr, "plan: %s\n", strata_last_error());
                return 1;
        }
        region = aligned_alloc(plan.align, (plan.bytes + plan.align - 1) / plan.align * plan.align);
        if (!region)
                return 1;
        cfg.memory = region;
        cfg.memory_size = plan.bytes;
        if (strata_init(&rt, &cfg) != STRATA_OK || strata_connect(rt) != STRATA_OK) {
                fprintf(stderr, "init: %s\n", strata_last_error());
                return 1;
        }
        for (int e = 0; e < 5; e++) {
                if (epoch(rt, &loader, idx, &last))
                        return 1;
                if (e == 0)
                        first = last;
                printf("epoch %d loss %.4f\n", e + 1, last);
        }
        if (strata_teardown(rt) != STRATA_OK)
                return 1;
        free(region);
        printf(last < first ? "ok: the loss fell\n" : "the loss did not fall\n");
        return last < first ? 0 : 1;
}
