/*
 * strata-bench-gemm: bad input exits 2 naming the problem; a run times every GEMM of a step;
 * --chunks adds invariant mode's chunk tree beside each dW, outside the step's floor.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-bench-gemm"

static int run(const char *args, char *out, size_t n)
{
        return cli_run(BIN, args, out, n);
}

Test(strata_bench_gemm_cli, bad_options_exit_2)
{
        static const char *bad[][2] = {
                { "--batch 0", "--batch" },        { "--batch x", "--batch" },
                { "--reps -1", "--reps" },         { "--model 784", "--model" },
                { "--model 784-x-10", "--model" }, { "--model 0-10", "--model" },
                { "--frobnicate", "--frobnicate" }, { "--batch", "--batch" },
                { "--model 65536-65536 --batch 1048576", "limit" },
                { "--chunks 3", "--chunks 3 (a power of two" }, { "--chunks 1", "--chunks" },
                { "--chunks 512", "--chunks" },   { "--chunks x", "--chunks" },
        };
        char out[4096];

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(run(bad[i][0], out, sizeof(out)), 2, "%s -> %s", bad[i][0], out);
                cr_assert_not_null(strstr(out, bad[i][1]), "%s -> %s", bad[i][0], out);
                cr_assert_null(strstr(out, "median"), "nothing may run: %s", out);
        }
}

/* A 3-layer model has forward and dW for every layer and dX for all but the first: 8 GEMMs. */
Test(strata_bench_gemm_cli, times_every_gemm_of_a_step)
{
        char out[8192], *p = out;
        int rows = 0;
        double sum = 0.0, total = -1.0, best;

        cr_assert_eq(run("--model 40-16-8-4 --batch 6 --reps 5 --json", out, sizeof(out)), 0,
                     "%s", out);
        while ((p = strstr(p, "\"median_us\":")) != NULL) {
                rows++;
                sum += strtod(p + 12, NULL);
                p += 12;
        }
        cr_assert_eq(rows, 8, "%s", out);
        p = strstr(out, "\"step_gemm_us_median\":");
        cr_assert_not_null(p, "%s", out);
        total = strtod(p + 22, NULL);
        cr_assert_float_eq(total, sum, 0.05 * rows, "the floor is the sum of its GEMMs: %s", out);
        p = strstr(out, "\"step_gemm_us_best\":");
        cr_assert_not_null(p);
        best = strtod(p + 20, NULL);
        cr_assert(best > 0.0 && best <= total, "%s", out);
        cr_assert_not_null(strstr(out, "\"m\":6,\"n\":16,\"k\":40"), "first forward: %s", out);
}

/* --chunks 4: a dW_tree row right after each of the 3 dW rows; the floor sums the 8 GEMMs. */
Test(strata_bench_gemm_cli, chunks_time_the_tree_beside_each_dw)
{
        char out[8192];
        int rows = 0, trees = 0, after_dw = 0, floor_seen = 0, dw_layer = -1;
        double sum = 0.0;

        cr_assert_eq(run("--model 40-16-8-4 --batch 12 --reps 5 --json --chunks 4", out,
                         sizeof(out)), 0, "%s", out);
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                char *m = strstr(line, "\"median_us\":"), *r;

                if (strstr(line, "\"gemm\":\"dW_tree\"")) {
                        cr_assert(after_dw, "not after a dW: %s", line);
                        r = strstr(line, "\"layer\":");
                        cr_assert(r && atoi(r + 8) == dw_layer, "not the dW's layer: %s", line);
                        cr_assert_not_null(strstr(line, "\"chunks\":4"), "%s", line);
                        r = strstr(line, "\"whole_over_tree\":");
                        cr_assert(r && strtod(r + 18, NULL) > 0.0, "%s", line);
                        cr_assert(m && strtod(m + 12, NULL) > 0.0, "%s", line);
                        trees++;
                } else if (m) {
                        rows++;
                        sum += strtod(m + 12, NULL);
                } else if ((r = strstr(line, "\"step_gemm_us_median\":")) != NULL) {
                        cr_assert_float_eq(strtod(r + 22, NULL), sum, 0.05 * rows,
                                           "the floor is the 8 GEMMs' sum, not the trees'");
                        floor_seen = 1;
                }
                after_dw = strstr(line, "\"gemm\":\"dW\"") != NULL;
                if (after_dw)
                        dw_layer = atoi(strstr(line, "\"layer\":") + 8);
        }
        cr_assert_eq(rows, 8);
        cr_assert_eq(trees, 3);
        cr_assert(floor_seen);
}
