/*
 * strata-train with Fourier layers: --help gives spectralconv1d's and spectralconv2d's
 * arguments; an FNO block in --model (synthetic images, input(1,28,28)) trains under ddp to
 * the same final line twice, with no heap call in its steps (the tool exits 1 on one); modes
 * past what 28 points allow are refused (exit 2) naming the module and the value, before
 * anything trains.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define FNO "--model 'input(1,28,28) conv2d(4,1) spectralconv2d(4,6,6) conv2d(4,1,from=0) " \
            "add(from=1) gelu flatten linear(10)' "
#define RUN "--synthetic 256 --batch 64 --epochs 1 --strategy ddp --devices 2 --json "

static char out[1 << 15];

Test(spectral_cli, help_names_the_arguments)
{
        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "spectralconv1d(out,modes)"), "%s", out);
        cr_assert_not_null(strstr(out, "spectralconv2d(out,modes1,modes2)"), "%s", out);
}

Test(spectral_cli, an_fno_block_trains_and_repeats, .timeout = 120)
{
        static char again[1 << 15];
        char a[4096], b[4096];

        cr_assert_eq(cli_run(BIN, RUN FNO, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(cli_run(BIN, RUN FNO, again, sizeof(again)), 0, "%s", again);
        cli_epoch_line(out, 1, a, sizeof(a));
        cli_epoch_line(again, 1, b, sizeof(b));
        cr_assert_str_eq(a, b);
}

Test(spectral_cli, modes_past_the_extent_are_refused, .timeout = 60)
{
        cr_assert_eq(cli_run(BIN, "--model 'spectralconv2d(4,15,6) flatten linear(10)' --plan",
                             out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "spectralconv2d (module 0): modes1 15"), "%s", out);
        cr_assert_null(strstr(out, "epoch "), "%s", out);
}
