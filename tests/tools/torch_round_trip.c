/*
 * strata-from-torch and strata-to-torch end to end: a PyTorch model (tests/tools/
 * torch_models.py: an MLP, the Fashion-MNIST CNN, a U-Net-like skip model, a ResNet block, a
 * convolution of each padding mode) goes through strata-from-torch; Strata evaluates the
 * converted weights as the original module predicts them; it trains a few steps under ddp and
 * under fsdp on 2 devices with --export-safetensors, strata-to-torch writes the PyTorch module
 * of the export, and PyTorch's forward on the test images gives the loss Strata reported to
 * <= 1e-5 relative (and its accuracy). Every refusal names the node and its op. Skipped where
 * Python has no torch.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define PY "/usr/bin/python3 "
#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define FROM STRATA_SOURCE_DIR "/tools/strata-from-torch"
#define TO STRATA_SOURCE_DIR "/tools/strata-to-torch"
#define MODELS STRATA_SOURCE_DIR "/tests/tools/torch_models.py"

static char out[1 << 14];

static void refused(const char *dir, const char *expr, const char *shape, const char *want);

static void need_torch(void)
{
        if (cli_sh(PY "-c 'import torch, torch.fx' 2>&1", out, sizeof(out)) != 0)
                cr_skip_test("Python has no torch (Debian's python3-torch)");
}

/* The value of "@p key": in JSON line @p s, as text. */
static void json_field(const char *s, const char *key, char *val, size_t n)
{
        char k[64];
        const char *p;

        snprintf(k, sizeof(k), "\"%s\":", key);
        p = strstr(s, k);
        cr_assert_not_null(p, "%s not in %s", key, s);
        p += strlen(k);
        snprintf(val, n, "%.*s", (int)strcspn(p, ",}"), p);
}

/* A directory with the seeded IDX images the runs train and evaluate on. */
static void data_dir(char *dir, size_t n, const char *tag)
{
        char cmd[512];

        cli_mkdtemp(dir, n, tag);
        snprintf(cmd, sizeof(cmd), PY MODELS " data %s 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
}

/* strata-from-torch of @p expr into dir/m.line and dir/m.st; its exit status. */
static int from_torch(const char *dir, const char *expr, const char *shape)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), FROM " " MODELS " \"%s\" --input-shape %s --line %s/m.line "
                 "--weights %s/m.st 2>&1", expr, shape, dir, dir);
        return cli_sh(cmd, out, sizeof(out));
}

/*
 * strata-train on dir's images with the converted line and @p args (dir for its %s),
 * exporting dir/@p name; its last JSON line's test_loss and test_acc into @p loss and @p acc.
 */
static void train(const char *dir, const char *args, const char *name, char *loss, char *acc)
{
        static char cmd[4096], last[4096];
        char a[512];

        snprintf(a, sizeof(a), args, dir);
        snprintf(cmd, sizeof(cmd), BIN " --data %s --model \"$(cat %s/m.line)\" --batch 32 "
                 "--seed 3 %s --export-safetensors %s/%s --json 2>&1 | tail -1", dir, dir, a,
                 dir, name);
        cr_assert_eq(cli_sh(cmd, last, sizeof(last)), 0, "%s", last);
        json_field(last, "test_loss", loss, 32);
        json_field(last, "test_acc", acc, 32);
}

/*
 * torch_models.py's @p mode ("direct", the module @p arg; "check", the module source @p arg)
 * on dir's test images with export dir/@p st, against Strata's @p loss and @p acc.
 */
static void pytorch_agrees(const char *dir, const char *mode, const char *arg, const char *st,
                           const char *loss, const char *acc, const char *shape)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), PY MODELS " %s %s \"%s\" %s/%s %s %s %s 2>&1", mode, dir,
                 arg, dir, st, loss, acc, shape);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s: %s", cmd, out);
        cr_assert_not_null(strstr(out, "agree"), "%s", out);
}

/* dir/@p st through strata-to-torch into dir/@p st.py, then PyTorch against loss and acc. */
static void back_to_torch(const char *dir, const char *st, const char *loss, const char *acc)
{
        char cmd[1024], net[512];

        snprintf(net, sizeof(net), "%s/%s.py", dir, st);
        snprintf(cmd, sizeof(cmd), TO " %s/%s -o %s 2>&1", dir, st, net);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        pytorch_agrees(dir, "check", net, st, loss, acc, "");
}

/*
 * The round trip of @p expr: the converted weights predict as the module does; trained under
 * ddp and under fsdp on 2 devices, each export back in PyTorch gives Strata's figures.
 */
static void round_trip_shaped(const char *expr, const char *tag, const char *shape)
{
        char dir[256], loss[32], acc[32];

        need_torch();
        data_dir(dir, sizeof(dir), tag);
        cr_assert_eq(from_torch(dir, expr, shape), 0, "%s", out);
        train(dir, "--strategy ddp --devices 2 --evaluate %s/m.st", "e.st", loss, acc);
        pytorch_agrees(dir, "direct", expr, "e.st", loss, acc, shape);
        back_to_torch(dir, "e.st", loss, acc);
        train(dir, "--strategy ddp --devices 2 --epochs 1 --init-weights %s/m.st", "ddp.st",
              loss, acc);
        back_to_torch(dir, "ddp.st", loss, acc);
        train(dir, "--strategy fsdp --devices 2 --epochs 1 --init-weights %s/m.st", "fsdp.st",
              loss, acc);
        back_to_torch(dir, "fsdp.st", loss, acc);
        cli_rmtree(dir);
}

static void round_trip(const char *expr, const char *tag)
{
        round_trip_shaped(expr, tag, "1,28,28");
}

Test(torch_round_trip, mlp, .timeout = 300)
{
        round_trip("mlp()", "torch-mlp");
}

Test(torch_round_trip, fashion_mnist_cnn, .timeout = 300)
{
        round_trip("cnn()", "torch-cnn");
}

Test(torch_round_trip, unet_skip_concat, .timeout = 300)
{
        round_trip("unet()", "torch-unet");
}

Test(torch_round_trip, resnet_block_add, .timeout = 300)
{
        round_trip("resblock()", "torch-resblock");
}

Test(torch_round_trip, conv_each_padding_mode, .timeout = 300)
{
        static const char *const modes[] = { "zeros", "circular", "reflect", "replicate" };
        char expr[64], tag[64];

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                snprintf(expr, sizeof(expr), "conv_mode('%s')", modes[i]);
                snprintf(tag, sizeof(tag), "torch-%s", modes[i]);
                round_trip(expr, tag);
        }
}

Test(torch_round_trip, several_inputs_and_outputs, .timeout = 120)
{
        static char cmd[2048];
        char dir[256];
        FILE *f;

        need_torch();
        cli_mkdtemp(dir, sizeof(dir), "torch-two");
        cr_assert_eq(from_torch(dir, "two()", "4 --input-shape 4 --loss mse --loss l1"), 0,
                     "%s", out);
        f = fopen(cli_path(dir, "m.line"), "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(cmd, sizeof(cmd), f));
        fclose(f);
        cr_assert_str_eq(cmd, "input(4) input(4) linear(16) tanh linear(16,from=input1) tanh "
                         "concat(from=1) linear(4) output(mse) linear(4,from=4) output(l1)\n");
        /* Strata takes the line and the weights; the module written back predicts as the
         * original does */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic-regression 64 --model \"$(cat %s/m.line)\" "
                 "--devices 1 --strategy single --evaluate %s/m.st --export-safetensors %s/e.st "
                 "2>&1", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        snprintf(cmd, sizeof(cmd), TO " %s/e.st -o %s/e.py 2>&1 && " PY MODELS " same %s/e.py "
                 "%s/e.st 'two()' 2>&1", dir, dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "2 outputs, largest difference 0.0"), "%s", out);
        /* torch.cat's first tensor must be the module just before it */
        refused(dir, "two(True)", "4 --input-shape 4", "node 'cat' (call_function torch.cat): "
                "concat: Strata's merges the module just before it with an earlier one");
        cli_rmtree(dir);
}

Test(torch_round_trip, conv1d_and_conv3d, .timeout = 300)
{
        round_trip_shaped("conv1d()", "torch-conv1d", "28,28");
        round_trip_shaped("conv3d()", "torch-conv3d", "1,4,14,14");
}

Test(torch_round_trip, functions_and_methods, .timeout = 300)
{
        round_trip("functional()", "torch-functional");
}

/* The module @p expr exported as dir/m.onnx by PyTorch; skips without python3-onnx. */
static void to_onnx(const char *dir, const char *expr, const char *shape)
{
        char cmd[1024];

        if (cli_sh(PY "-c 'import onnx' 2>&1", out, sizeof(out)) != 0)
                cr_skip_test("Python has no onnx (Debian's python3-onnx)");
        snprintf(cmd, sizeof(cmd), PY MODELS " onnx \"%s\" %s %s/m.onnx 2>&1", expr, shape,
                 dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
}

/* An ONNX file of the CNN and of a convolution: Strata's figures are PyTorch's module's. */
Test(torch_round_trip, onnx_in, .timeout = 300)
{
        static const char *const models[] = { "cnn()", "conv_mode('zeros')" };
        static char cmd[2048];
        char dir[256], loss[32], acc[32];

        need_torch();
        data_dir(dir, sizeof(dir), "torch-onnx");
        for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
                to_onnx(dir, models[i], "1,28,28");
                snprintf(cmd, sizeof(cmd), FROM " %s/m.onnx --input-shape 1,28,28 --line "
                         "%s/m.line --weights %s/m.st 2>&1", dir, dir, dir);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
                train(dir, "--strategy ddp --devices 2 --evaluate %s/m.st", "e.st", loss, acc);
                pytorch_agrees(dir, "direct", models[i], "e.st", loss, acc, "1,28,28");
                train(dir, "--strategy fsdp --devices 2 --epochs 1 --init-weights %s/m.st",
                      "f.st", loss, acc);
                back_to_torch(dir, "f.st", loss, acc);
        }
        /* an op Strata has no module for, named */
        to_onnx(dir, "mul()", "1,28,28");
        snprintf(cmd, sizeof(cmd), FROM " %s/m.onnx --input-shape 1,28,28 --line %s/m.line "
                 "--weights %s/x.st 2>&1", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "(ONNX op Mul): Strata has no module for it"), "%s", out);
        to_onnx(dir, "softmax()", "1,28,28");
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "(ONNX op Softmax): Strata has no module for it"), "%s",
                           out);
        snprintf(cmd, sizeof(cmd), "echo junk > %s/j.onnx; " FROM " %s/j.onnx --input-shape 8 "
                 "--line %s/m.line --weights %s/x.st 2>&1", dir, dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "j.onnx: not an ONNX file"), "%s", out);
        cr_assert_null(fopen(cli_path(dir, "x.st"), "r"), "a refusal writes nothing");
        cli_rmtree(dir);
}

/* TorchFort's FCN: the guide's line, and the module written back predicts as the original. */
Test(torch_round_trip, torchfort_fcn, .timeout = 120)
{
        static char cmd[4096];
        char dir[256];

        need_torch();
        cli_mkdtemp(dir, sizeof(dir), "torch-fcn");
        cr_assert_eq(from_torch(dir, "fcn()", "1,32,32"), 0, "%s", out);
        cr_assert_not_null(strstr(out, "input(1,32,32) conv2d(1,3,padding=1,padding_mode="
                                       "circular)\n"), "%s", out);
        snprintf(cmd, sizeof(cmd), BIN " --synthetic-regression 64 --loss mse --model "
                 "\"$(cat %s/m.line)\" --devices 2 --strategy ddp --evaluate %s/m.st "
                 "--export-safetensors %s/e.st 2>&1 && " TO " %s/e.st -o %s/e.py 2>&1 && "
                 PY MODELS " same %s/e.py %s/e.st 'fcn()' 2>&1", dir, dir, dir, dir, dir, dir,
                 dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "1 outputs, largest difference 0.0"), "%s", out);
        cli_rmtree(dir);
}

/* strata-from-torch refuses @p expr on samples of @p shape, exit 2 naming @p want. */
static void refused(const char *dir, const char *expr, const char *shape, const char *want)
{
        cr_assert_eq(from_torch(dir, expr, shape), 2, "%s: %s", expr, out);
        cr_assert_not_null(strstr(out, want), "%s: want '%s' in %s", expr, want, out);
        cr_assert_null(strstr(out, "Traceback"), "%s", out);
}

/* Modules and calls Strata has, with arguments it has not (torch_models.py's BAD). */
static const struct {
        const char *kind, *shape, *want;
} bad[] = {
        { "flatten2", NULL, "node '_0' (call_module 0): Flatten(start_dim=2, end_dim=-1): "
                            "Strata's flattens the whole sample" },
        { "layernorm_part", NULL, "LayerNorm over [8, 8] of a sample [2, 8, 8]" },
        { "layernorm_plain", NULL, "LayerNorm without elementwise_affine" },
        { "batchnorm_image", "2,8", "node '_0' (call_module 0): BatchNorm1d over an input of "
                                    "shape [2, 8]" },
        { "bn_no_stats", NULL, "node '_1' (call_module 1): BatchNorm1d without affine, "
                               "running statistics or a momentum" },
        { "upsample_frac", NULL, "Upsample by [1.5, 1.5]: Strata's scales by whole numbers" },
        { "upsample_align", NULL, "Upsample with align_corners=True" },
        { "upsample_mode", NULL, "Upsample mode 'bicubic' on 2 spatial dimensions" },
        { "upsample_size", NULL, "Upsample to size [12, 12]: not a whole multiple of [8, 8]" },
        { "avg_exclude", NULL, "AvgPool2d with count_include_pad=False" },
        { "linear_nobias", NULL, "node '_1' (call_module 1): Linear without a bias" },
        { "transposed", NULL, "node '_0' (call_module 0): ConvTranspose2d: Strata has no such "
                              "module" },
        { "cat3", NULL, "node 'cat' (call_function torch.cat): torch.cat of 3 tensors along "
                        "dim 1" },
        { "cat_dim2", NULL, "torch.cat of 2 tensors along dim 2" },
        { "add_alpha", NULL, "node 'add' (call_function torch.add): an add of other than two "
                             "tensors" },
        { "add_const", NULL, "node 'add' (call_function _operator.add): merges a value that is "
                             "not a module's output or an input" },
};

Test(torch_round_trip, from_torch_refusals, .timeout = 120)
{
        char dir[256], cmd[1024];

        need_torch();
        cli_mkdtemp(dir, sizeof(dir), "torch-refuse");
        refused(dir, "softmax()", "1,28,28", "node '_2' (call_module 2): Softmax: Strata has "
                "no such module");
        refused(dir, "mul()", "1,28,28", "node 'mul' (call_function _operator.mul): Strata "
                "has no module for it");
        refused(dir, "grouped()", "2,8,8", "node '_0' (call_module 0): groups=2: Strata's "
                "convolutions have one group");
        refused(dir, "ceil_pool()", "1,9,9", "(call_module 0): MaxPool2d with ceil_mode=True");
        refused(dir, "shared()", "8", "node 'fc_1' (call_module fc): the module is called "
                "again (first at 'fc')");
        refused(dir, "not_a_module()", "8", "'not_a_module()' is a int, not a torch.nn.Module");
        refused(dir, "grouped()", "1,28,28", "does not run on samples of shape [[1, 28, 28]]: "
                "Given groups=2");
        refused(dir, "cnn()", "1,28,28 --input-shape 4", "the module takes 1 input(s) and 2 "
                "--input-shape given");
        refused(dir, "linear_on_image()", "1,28,28", "node '_0' (call_module 0): Linear over "
                "an input of shape [1, 28, 28]");
        refused(dir, "two()", "4 --input-shape 4 --loss mse", "1 --loss given for 2 outputs");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char expr[64];

                snprintf(expr, sizeof(expr), "bad('%s')", bad[i].kind);
                refused(dir, expr, bad[i].shape ? bad[i].shape : "2,8,8", bad[i].want);
        }
        cr_assert_null(fopen(cli_path(dir, "m.st"), "r"), "a refusal writes nothing");
        snprintf(cmd, sizeof(cmd), FROM " %s/none.py 'm()' --input-shape 8 --line %s/l "
                 "--weights %s/w 2>&1", dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "none.py: not a file"), "%s", out);
        snprintf(cmd, sizeof(cmd), FROM " " MODELS " 'cnn()' --input-shape 1,x --line %s/l "
                 "--weights %s/w 2>&1", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "'1,x' is not C[,D][,H][,W]"), "%s", out);
        snprintf(cmd, sizeof(cmd), FROM " " MODELS " --input-shape 8 --line %s/l --weights "
                 "%s/w 2>&1", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "an expression that builds the module is needed"), "%s",
                           out);
        cli_rmtree(dir);
}

/* strata-to-torch refuses dir/@p file (with @p args), exit 2 naming @p want. */
static void to_refused(const char *dir, const char *file, const char *args, const char *want)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), TO " %s/%s %s -o %s/out.py 2>&1", dir, file, args, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, want), "want '%s' in %s", want, out);
        cr_assert_null(fopen(cli_path(dir, "out.py"), "r"), "a refusal writes nothing");
}

Test(torch_round_trip, to_torch_refusals, .timeout = 120)
{
        char dir[256], cmd[1024];

        need_torch();
        cli_mkdtemp(dir, sizeof(dir), "torch-to-refuse");
        to_refused(dir, "none.st", "", "none.st: No such file or directory");
        snprintf(cmd, sizeof(cmd), PY "-c 'import struct, sys; d = sys.argv[1]; "
                 "open(d + \"/short.st\", \"wb\").write(b\"short\"); "
                 "open(d + \"/long.st\", \"wb\").write(struct.pack(\"<Q\", 255) + b\"xx\"); "
                 "open(d + \"/nometa.st\", \"wb\").write(struct.pack(\"<Q\", 8) + "
                 "b\"{}      \")' %s 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        to_refused(dir, "short.st", "", "not a safetensors file (shorter than 8 bytes)");
        to_refused(dir, "long.st", "", "not a safetensors file (a header of 255 bytes)");
        to_refused(dir, "nometa.st", "", "holds no model line (strata.model in its metadata); "
                   "give --model");
        to_refused(dir, "nometa.st", "--model 'input(8) linear(4) bogus'",
                   "model line, module 1 (bogus): no such module");
        to_refused(dir, "nometa.st", "--model 'linear(4)'", "model line: no input(...); give "
                   "--input-shape");
        to_refused(dir, "nometa.st", "--model 'input(1,8,8) linear(4)'",
                   "model line, module 0 (linear): reads a sample of shape [1, 8, 8]");
        to_refused(dir, "nometa.st", "--model 'input(1,8,8) conv2d(4,9)'",
                   "model line, module 0 (conv2d): leaves no output of an input [1, 8, 8]");
        to_refused(dir, "nometa.st", "--model 'input(4) linear(4,size=3)'",
                   "model line, module 0 (linear): no argument 'size'");
        to_refused(dir, "nometa.st", "--model 'input(4) linear(4) add(from=5)'",
                   "model line, module 1: from=5 is not an earlier module");
        cli_rmtree(dir);
}
