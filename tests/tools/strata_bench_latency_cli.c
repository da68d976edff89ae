/*
 * strata-bench-latency: bad options exit 2 with the usage; weights that do not fit the line
 * exit 1 naming why; a short run on strata-train's export reports an inference-only plan (no
 * optimizer state) and the percentiles in order. Timings are not asserted.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-bench-latency"
#define TRAIN STRATA_BUILD_DIR "/bin/strata-train"
#define LINE "'input(16) linear(8) relu linear(4)'"

Test(strata_bench_latency_cli, bad_input_refused_and_a_short_run, .timeout = 120)
{
        static const char *bad[] = { "", "--model x", "--batch 0 --model m --weights w",
                                     "--iters x --model m --weights w", "--frobnicate 1",
                                     "--model " LINE " --weights" };
        static char out[8192], args[512];
        char dir[256];
        double p10, med, p90;
        const char *j;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(cli_run(BIN, bad[i], out, sizeof(out)), 2, "%s: %s", bad[i], out);
                cr_assert_not_null(strstr(out, "usage: strata-bench-latency"), "%s", out);
        }
        cli_mkdtemp(dir, sizeof(dir), "bench-latency");
        snprintf(args, sizeof(args), "--synthetic 64 --model 16-8-4 --epochs 1 --strategy single "
                 "--quiet --export-safetensors %s/w.st", dir);
        cr_assert_eq(cli_run(TRAIN, args, out, sizeof(out)), 0, "%s", out);
        snprintf(args, sizeof(args), "--model 'input(16) linear(9) relu linear(4)' --weights "
                 "%s/w.st", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 1, "%s", out);
        cr_assert_not_null(strstr(out, "does not fit this model"), "%s", out);
        snprintf(args, sizeof(args), "--model " LINE " --weights %s/w.st --batch 2 --iters 20 "
                 "--warmup 2 --json", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"batch\":2,"), "%s", out);
        cr_assert_not_null(strstr(out, "\"optimizer_bytes\":0,\"params\":172}"), "%s", out);
        j = strstr(out, "\"us_median\":");
        cr_assert_not_null(j);
        cr_assert_eq(sscanf(j, "\"us_median\":%lf,\"us_p10\":%lf,\"us_p90\":%lf", &med, &p10,
                            &p90), 3, "%s", out);
        cr_assert(p10 > 0.0 && p10 <= med && med <= p90, "%s", out);
        cli_rmtree(dir);
}
