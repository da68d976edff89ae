/*
 * libFuzzer target: strata_load_weights() on arbitrary bytes, strict and partial. Whatever the
 * input, the call returns a status without crashing, hanging or allocating, the runtime stays
 * READY, and what it reports adds up. Built and run by `make fuzz` (clang, ASan+UBSan); the
 * seed corpus (tools/fuzz/corpus/weights) holds a valid file of this target's model.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"

static struct strata_runtime *rt;
static char path[64];

static void remove_input(void)
{
        unlink(path);
}

/* The checkpoint target's model: weights, biases and BatchNorm's statistics. */
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
                fprintf(stderr, "fuzz-weights: %s\n", strata_last_error());
                abort();
        }
        snprintf(path, sizeof(path), "/tmp/strata-fuzz-%ld.safetensors", (long)getpid());
        atexit(remove_input);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
        struct strata_weights_info info;
        FILE *f;
        int rc;

        if (!rt)
                start();
        f = fopen(path, "wb");
        if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
                abort();
        rc = strata_load_weights(rt, path, n & 1 ? STRATA_WEIGHTS_PARTIAL : 0, &info);
        if (strata_state(rt) != STRATA_STATE_READY)
                abort(); /* a load refused or done must leave the runtime usable */
        if (rc == STRATA_OK && (info.loaded < 1 || info.loaded > 8 ||
                                memchr(info.left, '\0', sizeof(info.left)) == NULL))
                abort();
        return 0;
}
