/*
 * The strata Python package (python/): installed offline into a temporary directory with pip
 * (--no-build-isolation --no-index --target, from a copy of python/'s sources, so that the
 * source tree stays clean and no earlier build of it is taken), then
 * tests/tools/python_package.py run with it over this build's libstrata.so: the mirrored
 * structs have the C sizes; the default MLP trained on the first Fashion-MNIST samples from
 * NumPy arrays reaches strata-train's weights bit for bit and its printed loss, in order
 * (--shuffle off) and shuffled (the library's sampler, under ddp), and hands its weights to
 * a torch module; float targets from f64 inputs and shuffled epochs train reproducibly and
 * resume from a checkpoint bitwise; a CNN defined in PyTorch comes in with
 * strata.Model.from_torch(), predicts what PyTorch predicts, and its trained weights go back
 * into the same module; every refusal is a StrataError carrying the library's message. Skipped without python3, NumPy, pip or setuptools, and under a sanitizer (its
 * runtime would have to be loaded first into the interpreter).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/strata.h"
#include "tests/support/cli.h"

#define PY "/usr/bin/python3"
#define SCRIPT STRATA_SOURCE_DIR "/tests/tools/python_package.py"
#define PKG STRATA_SOURCE_DIR "/python"
#define FMNIST "/usr/share/datasets/fashion-mnist"

static char out[1 << 15];

/* Skip unless the plain build has an interpreter with NumPy, pip and setuptools. */
static void need_python(void)
{
        if (STRATA_SAN[0])
                cr_skip_test("sanitizer build: libstrata.so cannot load into python3");
        if (access(PY, X_OK) ||
            cli_sh(PY " -c 'import setuptools, numpy, pip' 2>&1", out, sizeof(out)))
                cr_skip_test("python3 with NumPy, pip and setuptools missing: %s", out);
}

/* Install the package into dir/site offline; fails the test with pip's output if it fails. */
static void install(const char *dir)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "mkdir %s/src && cp -r %s/pyproject.toml %s/strata %s/src && "
                 "cd %s/src && " PY " -m pip install -q --no-build-isolation --no-index "
                 "--no-deps --target %s/site . 2>&1", dir, PKG, PKG, dir, dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s\n%s", cmd, out);
}

/* Run the script with @p args under the installed package; its exit status. */
static int script(const char *dir, const char *args)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "cd %s && PYTHONPATH=%s/site STRATA_LIB=" STRATA_BUILD_DIR
                 "/libstrata.so " PY " " SCRIPT " %s 2>&1", dir, dir, args);
        return cli_sh(cmd, out, sizeof(out));
}

Test(python_package, layout_and_refusals, .timeout = 300)
{
        char dir[256], args[512];

        need_python();
        cli_mkdtemp(dir, sizeof(dir), "python");
        install(dir);
        snprintf(args, sizeof(args), "layout strata_dims=%zu strata_model=%zu strata_batch=%zu "
                 "strata_dataset=%zu strata_metrics=%zu strata_plan_info=%zu "
                 "strata_weights_info=%zu strata_sampler=%zu", sizeof(struct strata_dims),
                 sizeof(struct strata_model), sizeof(struct strata_batch),
                 sizeof(struct strata_dataset), sizeof(struct strata_metrics),
                 sizeof(struct strata_plan_info), sizeof(struct strata_weights_info),
                 sizeof(struct strata_sampler));
        cr_assert_eq(script(dir, args), 0, "%s", out);
        cr_assert_eq(strata_module_bytes(), sizeof(struct strata_module));
        snprintf(args, sizeof(args), "errors %s", dir);
        cr_assert_eq(script(dir, args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "refused: STRATA_EINVAL: invalid argument: model "
                                  "line: unbalanced parentheses"), "%s", out);
        cr_assert_not_null(strstr(out, "\nOK"), "%s", out);
        cli_rmtree(dir);
}

Test(python_package, float_targets_f64_inputs_shuffled_epochs_checkpoint, .timeout = 300)
{
        char dir[256], args[512];

        need_python();
        cli_mkdtemp(dir, sizeof(dir), "python");
        install(dir);
        snprintf(args, sizeof(args), "regression %s", dir);
        cr_assert_eq(script(dir, args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "OK"), "%s", out);
        cli_rmtree(dir);
}

Test(python_package, a_torch_module_in_and_its_trained_weights_back, .timeout = 300)
{
        char dir[256], args[512];

        need_python();
        if (cli_sh(PY " -c 'import torch' 2>&1", out, sizeof(out)))
                cr_skip_test("python3-torch missing: %s", out);
        cli_mkdtemp(dir, sizeof(dir), "python");
        install(dir);
        snprintf(args, sizeof(args), "torch %s", dir);
        cr_assert_eq(script(dir, args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "refused: STRATA_EINVAL"), "%s", out);
        cr_assert_not_null(strstr(out, "\nOK"), "%s", out);
        cli_rmtree(dir);
}

Test(python_package, fit_matches_strata_train_bitwise, .timeout = 600)
{
        char dir[256], args[512];

        need_python();
        if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK))
                cr_skip_test("Fashion-MNIST missing (" FMNIST ")");
        cli_mkdtemp(dir, sizeof(dir), "python");
        install(dir);
        snprintf(args, sizeof(args), "train " STRATA_BUILD_DIR "/bin/strata-train " FMNIST " %s",
                 dir);
        cr_assert_eq(script(dir, args), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\nOK"), "%s", out);
        cli_rmtree(dir);
}
