/*
 * strata-train --model with skip connections: a residual block and a U-Net-style join in one
 * line train (ddp on 2 devices, synthetic images, no heap during training), and a merge
 * module that reads no earlier module, or a layout that does not fit, is refused (exit 2)
 * naming both modules before anything trains.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 512 --batch 64 --epochs 1 --strategy ddp --devices 2 "

static char out[1 << 15];

Test(skip_cli, a_line_with_skips_trains, .timeout = 120)
{
        cr_assert_eq(cli_run(BIN, RUN "--model 'input(1,28,28) conv2d(4,3,padding=1) relu "
                                      "conv2d(4,3,padding=1) add(from=1) relu maxpool2d(2) "
                                      "conv2d(4,3,padding=1) relu upsample(2) concat(from=4) "
                                      "maxpool2d(4) flatten linear(10)'",
                             out, sizeof(out)),
                     0, "%s", out);
        cr_assert_not_null(strstr(out, "final: "), "%s", out);
        /* a sanitizer's build does not count (-1): its runtime allocates on its own */
        cr_assert(strstr(out, "heap allocations during training: 0") ||
                  (STRATA_SAN[0] && strstr(out, "heap allocations during training: -1")), "%s",
                  out);
}

/* strata-train @p args exits 2 with @p needle, having trained nothing. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(skip_cli, bad_skips_are_refused_by_module, .timeout = 120)
{
        refused(RUN "--model 'input(1,28,28) relu add(from=5) flatten linear(10)'",
                "module 1 (add): from=5 is not an earlier module");
        refused(RUN "--model 'input(1,28,28) conv2d(2,3) add(from=input) flatten linear(10)'",
                "its input (2, 26, 26) and the model's input (1, 28, 28) do not fit");
        refused(RUN "--model 'input(1,28,28) maxpool2d(2) concat(from=-1) flatten linear(10)'",
                "concat needs the same spatial extents");
        refused(RUN "--model 'input(1,28,28) relu add flatten linear(10)'",
                "the earlier module it reads is missing");
}
