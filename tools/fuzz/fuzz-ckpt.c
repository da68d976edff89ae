/*
 * libFuzzer target: strata_load_checkpoint() on arbitrary bytes. Whatever the input, the call
 * returns a status without crashing, hanging or allocating without bound, and a refused load
 * leaves the runtime READY. Built and run by `make fuzz` (clang, ASan+UBSan); the seed
 * corpus (tools/fuzz/corpus/ckpt) holds valid checkpoints of this target's model.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "strata/strata.h"

static struct strata_runtime *rt;
static char path[64];

static void remove_input(void)
{
        unlink(path);
}

/* A tiny model with every kind of saved state: weights, BatchNorm statistics, momentum. */
static void start(void)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 3 }, { .ops = &strata_batchnorm1d },
                { .ops = &strata_relu }, { .ops = &strata_linear, .out = 2 },
        };
        static const struct strata_model model = { .in_features = 4, .nmodules = 4,
                                                   .modules = mods };
        struct strata_config c = STRATA_CONFIG_INIT;

        c.model = &model;
        c.batch = 4;
        c.classes = 2;
        if (strata_init(&rt, &c) || strata_connect(rt)) {
                fprintf(stderr, "fuzz-ckpt: %s\n", strata_last_error());
                abort();
        }
        snprintf(path, sizeof(path), "/tmp/strata-fuzz-%ld.ckpt", (long)getpid());
        atexit(remove_input);
        if (getenv("STRATA_FUZZ_SEED")) /* writes a seed checkpoint and stops */
                exit(strata_save_checkpoint(rt, getenv("STRATA_FUZZ_SEED"), "seed", 4) ? 1 : 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
        unsigned char app[STRATA_CKPT_APP_BYTES];
        struct strata_ckpt_info info;
        size_t got;
        FILE *f;
        int rc;

        if (!rt)
                start();
        f = fopen(path, "wb");
        if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
                abort();
        rc = strata_load_checkpoint(rt, path, app, sizeof(app), &got, &info);
        if (strata_state(rt) != STRATA_STATE_READY)
                abort(); /* a load refused or done must leave the runtime usable */
        if (rc == STRATA_OK && (got > sizeof(app) || info.world < 1))
                abort();
        return 0;
}
