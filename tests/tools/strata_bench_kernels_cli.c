/* strata-bench-kernels: --help answers; an unknown option exits 2 naming it, before any peak. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-bench-kernels"

Test(strata_bench_kernels_cli, help_and_unknown_options)
{
        static const char *bad[] = { "--bogus", "--reps 5 -x", "784-256-10:16 --frobnicate" };
        char out[4096];

        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "usage: strata-bench-kernels"), "%s", out);
        cr_assert_null(strstr(out, "GF/s"), "--help measured: %s", out);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(cli_run(BIN, bad[i], out, sizeof(out)), 2, "%s -> %s", bad[i], out);
                cr_assert_not_null(strstr(out, "unknown option"), "%s -> %s", bad[i], out);
                cr_assert_null(strstr(out, "peaks"), "%s measured: %s", bad[i], out);
        }
}
