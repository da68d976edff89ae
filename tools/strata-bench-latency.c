/*
 * strata-bench-latency: the latency of one strata_predict_step() on an inference-only runtime
 * (strategy single, one device, its thread pinned as strata_init() places it), the weights of
 * a safetensors file loaded first. Each call is timed alone after a warm-up; the median, the
 * 10th and 90th percentiles are printed, with the runtime's plan.
 *
 *   strata-bench-latency --model LINE --weights FILE [--batch 1] [--iters 2000]
 *                        [--warmup 200] [--json]
 *
 * LINE is a model line with its input(...) (strata-train's export stores it, strata.model).
 * The inputs are fixed values in [-0.5, 0.5), the same for every call. tools/bench-latency.sh
 * runs it beside PyTorch eager and LibTorch on the same model and weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/strata.h"
#include "tools/timing.h"

#define MAX_MODULES 64

struct args {
        const char *line, *weights;
        int batch, iters, warmup, json;
};

static int usage(void)
{
        fprintf(stderr, "usage: strata-bench-latency --model LINE --weights FILE [--batch B] "
                        "[--iters N] [--warmup W] [--json]\n");
        return 2;
}

/* The command line into @p a: 0, or 2 after the usage. */
static int parse(int argc, char **argv, struct args *a)
{
        *a = (struct args){ .batch = 1, .iters = 2000, .warmup = 200 };
        for (int i = 1; i < argc; i++) {
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;

                if (!strcmp(argv[i], "--json")) {
                        a->json = 1;
                        continue;
                }
                if (!v)
                        return usage();
                if (!strcmp(argv[i], "--model"))
                        a->line = v;
                else if (!strcmp(argv[i], "--weights"))
                        a->weights = v;
                else if (!strcmp(argv[i], "--batch"))
                        a->batch = atoi(v);
                else if (!strcmp(argv[i], "--iters"))
                        a->iters = atoi(v);
                else if (!strcmp(argv[i], "--warmup"))
                        a->warmup = atoi(v);
                else
                        return usage();
                i++;
        }
        if (!a->line || !a->weights || a->batch < 1 || a->iters < 1 || a->warmup < 0)
                return usage();
        return 0;
}

/* @p n predictions of @p b into @p out, each timed into @p t (when not NULL): 0, or 1. */
static int calls(struct strata_runtime *rt, const struct strata_batch *b, float *out,
                 size_t cap, int n, double *t)
{
        for (int i = 0; i < n; i++) {
                double t0 = strata_tool_now();

                if (strata_predict_step(rt, b, out, cap) != STRATA_OK) {
                        fprintf(stderr, "strata-bench-latency: %s\n", strata_last_error());
                        return 1;
                }
                if (t)
                        t[i] = (strata_tool_now() - t0) * 1e6;
        }
        return 0;
}

/* The values in a layout: its channels times its extents (a flat vector: its width). */
static int values_of(const struct strata_dims *d)
{
        int n = d->channels;

        for (int i = 0; i < d->ndim; i++)
                n *= d->size[i];
        return n;
}

/*
 * The runtime of @p a's model and weights, inference only; *outputs gets a row's outputs. 0,
 * or 1 after the message.
 */
static int open_runtime(const struct args *a, struct strata_module *mods,
                        struct strata_model *m, struct strata_runtime **rt,
                        struct strata_plan_info *pl, int *outputs)
{
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_dims out;

        if (strata_model_parse(a->line, mods, MAX_MODULES, m) != STRATA_OK ||
            strata_model_output(m, &out) != STRATA_OK)
                goto fail;
        *outputs = values_of(&out);
        c.model = m;
        c.batch = a->batch;
        c.classes = *outputs;
        c.inference_only = 1;
        if (strata_plan(&c, pl) != STRATA_OK || strata_init(rt, &c) != STRATA_OK)
                goto fail;
        if (strata_connect(*rt) != STRATA_OK ||
            strata_load_weights(*rt, a->weights, STRATA_WEIGHTS_STRICT, NULL) != STRATA_OK) {
                fprintf(stderr, "strata-bench-latency: %s\n", strata_last_error());
                strata_teardown(*rt);
                return 1;
        }
        return 0;
fail:
        fprintf(stderr, "strata-bench-latency: %s\n", strata_last_error());
        return 1;
}

int main(int argc, char **argv)
{
        static struct strata_module mods[MAX_MODULES];
        struct strata_model m = { 0 };
        struct strata_plan_info pl;
        struct strata_runtime *rt;
        struct args a;
        float *x, *out;
        double *t, med, p10, p90;
        int rc, outputs;

        if ((rc = parse(argc, argv, &a)))
                return rc;
        if (open_runtime(&a, mods, &m, &rt, &pl, &outputs))
                return 1;
        /* the tool's own buffers, before any call is timed */
        x = strata_tool_filled((size_t)a.batch * (size_t)m.in_features, 7);
        out = calloc((size_t)a.batch * (size_t)outputs, sizeof(float));
        t = calloc((size_t)a.iters, sizeof(double));
        rc = !x || !out || !t;
        if (!rc) {
                struct strata_batch b = { .x = x, .rows = a.batch, .dim = m.in_features };
                size_t cap = (size_t)a.batch * (size_t)outputs;

                rc = calls(rt, &b, out, cap, a.warmup, NULL) ||
                     calls(rt, &b, out, cap, a.iters, t);
        }
        if (strata_teardown(rt) != STRATA_OK || rc) {
                fprintf(stderr, "strata-bench-latency: %s\n",
                        rc && (!x || !out || !t) ? "out of memory" : strata_last_error());
                return 1;
        }
        qsort(t, (size_t)a.iters, sizeof(double), strata_tool_cmp_double);
        p10 = t[a.iters / 10];
        p90 = t[a.iters * 9 / 10];
        med = strata_tool_median(t, (size_t)a.iters);
        if (a.json)
                printf("{\"batch\":%d,\"us_median\":%.3f,\"us_p10\":%.3f,\"us_p90\":%.3f,"
                       "\"plan_bytes\":%zu,\"optimizer_bytes\":%zu,\"params\":%zu}\n",
                       a.batch, med, p10, p90, pl.bytes, pl.optimizer_bytes, pl.params);
        else
                printf("batch %d: median %.3f us (p10 %.3f, p90 %.3f) over %d calls; plan %zu "
                       "bytes, %zu parameters, inference only\n", a.batch, med, p10, p90,
                       a.iters, pl.bytes, pl.params);
        free(x);
        free(out);
        free(t);
        return 0;
}
