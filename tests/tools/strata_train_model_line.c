/*
 * strata-train --model as a line of modules: the same model as widths trains to the same
 * bits, the IDX images give the line its input layout, and a line that does not fit is
 * refused (exit 2) naming the module, before anything trains.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 1024 --batch 64 --epochs 1 --strategy ddp --devices 2 --json "

static char out[1 << 15], ref[1 << 15];

/* The final line of a --json run (its "final" object) without timings. */
static const char *final_line(const char *o, char *line, size_t n)
{
        cli_epoch_line(o, 1, line, n);
        return line;
}

Test(model_line_cli, a_line_trains_as_its_widths_do, .timeout = 120)
{
        char a[4096], b[4096];

        cr_assert_eq(cli_run(BIN, RUN "--model 784-32-10", ref, sizeof(ref)), 0, "%s", ref);
        cr_assert_eq(cli_run(BIN, RUN "--model 'input(784) linear(32) relu linear(10)'", out,
                             sizeof(out)),
                     0, "%s", out);
        cr_assert_str_eq(final_line(out, a, sizeof(a)), final_line(ref, b, sizeof(b)));
}

/* strata-train @p args exits 2 with @p needle, having trained nothing. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(model_line_cli, the_images_give_the_line_its_layout, .timeout = 120)
{
        /* 1 x 28 x 28 from the IDX header: two 2x2 pools leave 7 x 7 of 4 channels */
        cr_assert_eq(cli_run(BIN, "--model 'conv2d(4,3,padding=1) relu maxpool2d(2) "
                             "maxpool2d(2) flatten linear(10)' --plan",
                             out, sizeof(out)),
                     0, "%s", out);
        refused("--model 'conv2d(4,3,padding=1) maxpool2d(2) maxpool2d(2) linear(10) "
                "conv2d(2,3)' --plan", "conv2d (module 4)");
}

Test(model_line_cli, lines_that_do_not_fit_are_refused_by_module, .timeout = 120)
{
        refused(RUN "--model 'linear(32) relu linear(10'", "unbalanced parentheses");
        refused(RUN "--model 'linear(32) frob linear(10)'", "module 1 (frob): no such module");
        refused(RUN "--model 'linear(32) relu linear(10)'", "needs input(C,H,W) first");
        refused("--epochs 1 --model 'input(1,28,27) linear(10)'", "input width must be the image "
                                                          "size (784), got 756");
        refused(RUN "--model '784--10'", "neither widths");
        refused(RUN "--model 'input(1,28,28) conv2d(4,3,padding=same,stride=2) flatten "
                "linear(10)'", "conv2d (module 0)");
        refused(RUN "--model 'input(1,28,28) conv2d(4,3,padding_mode=mirror) flatten "
                "linear(10)'", "padding_mode 'mirror' is not one of its words");
}
