/*
 * Deploying a trained surrogate in a simulation, from C: an inference-only runtime (no
 * gradients, no optimizer state planned) in a static region the program owns, the trained
 * weights loaded once at start, then one prediction per time step: the surrogate advances a
 * field of 16 cells (clamped to [-1, 1]) for STEPS steps. The weights are any safetensors file
 * of the model "input(16) linear(32) relu linear(16)": strata-train's export, PyTorch's
 * state_dict saved with safetensors, or a checkpoint's:
 *   strata-train --synthetic-regression 256 --model 16-32-16 --loss mse --strategy single \
 *           --export-safetensors w.safetensors
 *   cc -std=c11 -o predict predict.c $(pkg-config --cflags --libs strata)
 *   ./predict w.safetensors 100
 * It prints the plan, the mean latency of a prediction, and the final field's checksum (the
 * bits of its sum in double), which examples/fortran/predict.f90 prints the same. Built and
 * run by `make test` (tests/build/deploy.sh).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strata/strata.h>

#define CELLS 16

/* Every byte the runtime uses: strata_plan() says how many (checked below). */
static _Alignas(4096) unsigned char memory[4 << 20];

static int fail(const char *what)
{
        fprintf(stderr, "predict: %s: %s\n", what, strata_last_error());
        return 1;
}

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The surrogate's time loop: u advanced @p steps times, batch 1. */
static int run(struct strata_runtime *rt, float *u, int steps, double *seconds)
{
        float pred[CELLS];
        struct strata_batch b = { .x = u, .rows = 1, .dim = CELLS };
        double t0 = now_s();

        for (int s = 0; s < steps; s++) {
                if (strata_predict_step(rt, &b, pred, CELLS) != STRATA_OK)
                        return fail("predict");
                for (int i = 0; i < CELLS; i++)
                        u[i] = fmaxf(-1.0f, fminf(1.0f, pred[i]));
        }
        *seconds = now_s() - t0;
        return 0;
}

int main(int argc, char **argv)
{
        struct strata_module mods[3];
        struct strata_model model = { 0 };
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_weights_info info;
        struct strata_plan_info plan;
        struct strata_runtime *rt;
        int steps = argc > 2 ? atoi(argv[2]) : 100;
        float u[CELLS];
        double sum = 0.0, seconds = 0.0;
        uint64_t bits;

        if (argc < 2 || steps < 1) {
                fprintf(stderr, "usage: predict WEIGHTS.safetensors [STEPS]\n");
                return 2;
        }
        if (strata_model_parse("input(16) linear(32) relu linear(16)", mods, 3, &model) !=
            STRATA_OK)
                return fail("model");
        cfg.model = &model;
        cfg.batch = 1;
        cfg.classes = CELLS;
        cfg.inference_only = 1;
        cfg.memory = memory;
        cfg.memory_size = sizeof(memory);
        if (strata_plan(&cfg, &plan) != STRATA_OK)
                return fail("plan");
        printf("plan: %zu bytes for %zu parameters, optimizer state %zu (region %zu)\n",
               plan.bytes, plan.params, plan.optimizer_bytes, sizeof(memory));
        if (strata_init(&rt, &cfg) != STRATA_OK)
                return fail("init");
        if (strata_connect(rt) != STRATA_OK ||
            strata_load_weights(rt, argv[1], STRATA_WEIGHTS_STRICT, &info) != STRATA_OK) {
                fail("weights");
                strata_teardown(rt);
                return 1;
        }
        printf("weights: %d groups from %s (model %s)\n", info.loaded, argv[1],
               info.model[0] ? info.model : "not recorded");
        for (int i = 0; i < CELLS; i++)
                u[i] = sinf(6.2831853f * (float)i / CELLS);
        if (run(rt, u, steps, &seconds)) {
                strata_teardown(rt);
                return 1;
        }
        if (strata_teardown(rt) != STRATA_OK)
                return fail("teardown");
        for (int i = 0; i < CELLS; i++)
                sum += (double)u[i];
        memcpy(&bits, &sum, sizeof(bits));
        printf("%d predictions, %.2f us each\n", steps, seconds / steps * 1e6);
        printf("checksum %016llX\n", (unsigned long long)bits);
        return 0;
}
