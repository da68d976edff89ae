/*
 * strata-bench-gemm: the GEMMs of one MLP training step, timed alone through the CPU driver's
 * gemm op (OpenBLAS, serial, this thread pinned nowhere), with the shapes and transposes the
 * linear module uses. Their sum is the floor under a step on one device: no runtime can train
 * faster with these kernels, so it bounds the speed-up over a peer that calls the same GEMMs.
 *
 *   strata-bench-gemm [--model 784-256-128-10] [--batch 128] [--reps 200] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/strata.h"
#include "tools/timing.h"
#include "tools/widths.h"

#define MAX_LAYERS 16

struct shape {
        const char *what;
        int layer, ta, tb, m, n, k;
};

static double now_us(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}


static void usage(FILE *f)
{
        fprintf(f, "usage: strata-bench-gemm [--model 784-256-128-10] [--batch N] [--reps N] "
                   "[--json]\n");
}

int main(int argc, char **argv)
{
        int w[MAX_LAYERS + 1], nw = 0, batch = 128, reps = 200, json = 0, ns = 0;
        struct shape sh[3 * MAX_LAYERS];
        const struct strata_device_ops *d;
        size_t big = 0;
        float *a, *b, *c;
        double *t, sum_med = 0.0, sum_best = 0.0;

        nw = strata_tool_parse_widths("784-256-128-10", w, MAX_LAYERS + 1);
        for (int i = 1; i < argc; i++) {
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;

                if (!strcmp(argv[i], "--json")) {
                        json = 1;
                } else if (!strcmp(argv[i], "--help")) {
                        usage(stdout);
                        return 0;
                } else if (v && !strcmp(argv[i], "--model")) {
                        if ((nw = strata_tool_parse_widths(v, w, MAX_LAYERS + 1)) < 0) {
                                fprintf(stderr, "strata-bench-gemm: bad --model %s\n", v);
                                return 2;
                        }
                        i++;
                } else if (v && (!strcmp(argv[i], "--batch") || !strcmp(argv[i], "--reps"))) {
                        char *end;
                        long x = strtol(v, &end, 10);

                        if (*end || x < 1 || x > 1 << 20) {
                                fprintf(stderr, "strata-bench-gemm: bad %s %s\n", argv[i], v);
                                return 2;
                        }
                        *(argv[i][2] == 'b' ? &batch : &reps) = (int)x;
                        i++;
                } else {
                        fprintf(stderr, "strata-bench-gemm: unknown option or missing value: %s\n",
                                argv[i]);
                        usage(stderr);
                        return 2;
                }
        }
        if (strata_device_driver(STRATA_ACCEL_CPU, &d) != STRATA_OK) {
                fprintf(stderr, "strata-bench-gemm: %s\n", strata_last_error());
                return 1;
        }
        /* linear_forward, linear_backward (dW, then dX except for the first layer). */
        for (int l = 0; l + 1 < nw; l++) {
                int in = w[l], out = w[l + 1];

                sh[ns++] = (struct shape){ "forward", l, 0, 1, batch, out, in };
                sh[ns++] = (struct shape){ "dW", l, 1, 0, out, in, batch };
                if (l)
                        sh[ns++] = (struct shape){ "dX", l, 0, 0, batch, in, out };
        }
        for (int i = 0; i < ns; i++) {
                size_t x = (size_t)sh[i].m * sh[i].k, y = (size_t)sh[i].k * sh[i].n,
                       z = (size_t)sh[i].m * sh[i].n;

                big = x > big ? x : big;
                big = y > big ? y : big;
                big = z > big ? z : big;
        }
        if (big > ((size_t)1 << 29)) { /* three such matrices: 6 GiB */
                fprintf(stderr, "strata-bench-gemm: --model and --batch need matrices of %zu "
                                "floats; the limit is %zu\n", big, (size_t)1 << 29);
                return 2;
        }
        a = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        b = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        c = aligned_alloc(64, (big * sizeof(float) + 63) / 64 * 64);
        t = malloc(sizeof(double) * (size_t)reps);
        if (!a || !b || !c || !t) {
                fprintf(stderr, "strata-bench-gemm: out of memory\n");
                return 1;
        }
        for (size_t i = 0; i < big; i++) {
                a[i] = 0.01f * (float)(i % 97) - 0.4f;
                b[i] = 0.02f * (float)(i % 89) - 0.8f;
                c[i] = 0.0f;
        }
        if (!json)
                printf("GEMMs of one training step, batch %d, %d reps each, OPENBLAS_CORETYPE=%s\n"
                       "%-8s %5s %6s %6s %6s %10s %10s %8s\n",
                       batch, reps, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE")
                                                                : "auto",
                       "gemm", "layer", "m", "n", "k", "median_us", "best_us", "GFLOP/s");
        for (int i = 0; i < ns; i++) {
                const struct shape *s = &sh[i];
                int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
                double med, flop = 2.0 * s->m * s->n * s->k;

                for (int r = 0; r < reps + 5; r++) {
                        double t0 = now_us();

                        d->gemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c,
                                s->n);
                        if (r >= 5)
                                t[r - 5] = now_us() - t0; /* the first calls warm up */
                }
                qsort(t, (size_t)reps, sizeof(double), strata_tool_cmp_double);
                med = t[reps / 2];
                sum_med += med;
                sum_best += t[0];
                if (json)
                        printf("{\"gemm\":\"%s\",\"layer\":%d,\"m\":%d,\"n\":%d,\"k\":%d,"
                               "\"median_us\":%.2f,\"best_us\":%.2f}\n",
                               s->what, s->layer, s->m, s->n, s->k, med, t[0]);
                else
                        printf("%-8s %5d %6d %6d %6d %10.1f %10.1f %8.1f\n", s->what, s->layer,
                               s->m, s->n, s->k, med, t[0], flop / med * 1e-3);
        }
        if (json)
                printf("{\"batch\":%d,\"step_gemm_us_median\":%.2f,\"step_gemm_us_best\":%.2f,"
                       "\"samples_per_s_ceiling\":%.0f}\n",
                       batch, sum_med, sum_best, batch / sum_best * 1e6);
        else
                printf("step floor: %.1f us (medians), %.1f us (best) -> at most %.0f samples/s "
                       "on one device with these kernels\n",
                       sum_med, sum_best, batch / sum_best * 1e6);
        free(t);
        free(a);
        free(b);
        free(c);
        return 0;
}
