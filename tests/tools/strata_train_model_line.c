/*
 * strata-train --model as a line of modules: the same model as widths trains to the same
 * bits, the IDX images give the line its input layout, and a line that does not fit is
 * refused (exit 2) naming the module, before anything trains; --no-fusion exports the
 * same bytes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/h5files.h"

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
        /* --synthetic lends a line Fashion-MNIST's layout (issue 58, item 5); rows of float
         * features have none */
        refused("--synthetic-regression 1024 --loss mse --model 'linear(32) relu linear(10)'",
                "needs input(C,H,W) first");
        refused("--epochs 1 --model 'input(1,28,27) linear(10)'", "input width must be the image "
                                                          "size (784), got 756");
        refused(RUN "--model '784--10'", "neither widths");
        refused(RUN "--model 'input(1,28,28) conv2d(4,3,padding=same,stride=2) flatten "
                "linear(10)'", "conv2d (module 0)");
        refused(RUN "--model 'input(1,28,28) conv2d(4,3,padding_mode=mirror) flatten "
                "linear(10)'", "padding_mode 'mirror' is not one of its words");
}

Test(model_line_cli, an_hdf5_arrays_dimensions_are_its_layout, .timeout = 120)
{
        static const unsigned long long dims[4] = { 64, 2, 4, 4 }, tdims[2] = { 64, 1 };
        static float x[64 * 32], t[64];
        char dir[64], args[1024];

        for (int i = 0; i < 64 * 32; i++)
                x[i] = (float)((i * 37) % 11) / 11.0f;
        for (int i = 0; i < 64; i++)
                t[i] = x[i * 32 + 5] - x[i * 32 + 21];
        cli_mkdtemp(dir, sizeof(dir), "mline");
        h5w_dataset(cli_path(dir, "f.h5"), "u", H5W_F32, 4, dims, x);
        h5w_dataset(cli_path(dir, "f.h5"), "y", H5W_F32, 2, tdims, t);
        /* (2, 4, 4) from the file: a 3x3 'same' convolution, then 2 x 2 pooling: 2 x 2 x 2 */
        snprintf(args, sizeof(args), "--data %s --inputs u --targets y --loss mse --epochs 1 "
                 "--batch 16 --strategy single --model 'conv2d(2,3,padding=same) "
                 "maxpool2d(2) flatten linear(1)'", cli_path(dir, "f.h5"));
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        snprintf(args, sizeof(args), "--data %s --inputs u --targets y --loss mse --epochs 1 "
                 "--batch 16 --strategy single --model 'conv3d(2,3) flatten linear(1)'",
                 cli_path(dir, "f.h5"));
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "conv3d (module 0)"), "%s", out);
        cli_rmtree(dir);
}

/* --no-fusion: every module on its own; the CNN's exported weights are the same bytes. */
Test(model_line_cli, no_fusion_exports_the_same_bytes, .timeout = 120)
{
        char dir[256], args[1024];
        const char *line = "--model 'input(1,28,28) conv2d(4,3,padding=1) relu maxpool2d(2) "
                           "conv2d(8,3,padding=1) relu maxpool2d(2) flatten linear(10)' ";

        cli_mkdtemp(dir, sizeof(dir), "nofusion");
        for (int k = 0; k < 2; k++) {
                snprintf(args, sizeof(args), RUN "%s%s--export-safetensors %s", line,
                         k ? "--no-fusion " : "", cli_path(dir, k ? "alone.st" : "fused.st"));
                cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s -> %s", args, out);
        }
        cli_same_files(dir, "fused.st", "alone.st");
        cli_rmtree(dir);
}

/*
 * Fusion beside the other features: an output (MSE) on the last module of a fused group
 * (conv relu maxpool) and a cross-entropy output after it, accumulation 2 reduced every
 * micro-batch, zero2 on 2 devices: --no-fusion exports the same bytes.
 */
Test(model_line_cli, no_fusion_same_bytes_with_outputs_and_reduce_each, .timeout = 120)
{
        char dir[256], args[1024];
        const char *run = "--synthetic-regression 512 --batch 32 --epochs 1 --quiet "
                          "--accumulate 2 --accumulate-reduce each --strategy zero2 --devices 2 "
                          "--model 'input(1,8,8) conv2d(4,3,padding=1) relu maxpool2d(2) "
                          "output(mse) flatten linear(3) output(ce)' ";

        cli_mkdtemp(dir, sizeof(dir), "nofusionout");
        for (int k = 0; k < 2; k++) {
                snprintf(args, sizeof(args), "%s%s--export-safetensors %s", run,
                         k ? "--no-fusion " : "", cli_path(dir, k ? "alone.st" : "fused.st"));
                cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s -> %s", args, out);
        }
        cli_same_files(dir, "fused.st", "alone.st");
        cli_rmtree(dir);
}
