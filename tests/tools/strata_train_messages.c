/*
 * strata-train's messages name the file or option at fault and the reason: a gzip file cut
 * in its deflate stream and an IDX header claiming more data than its file holds are called
 * truncated (not corrupt, not too large for memory); --synthetic with more classes than a
 * label byte holds says so; --data naming a regular file says it is not a directory; a
 * training label beyond the model's outputs is named with its value, index and file.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define FMNIST "/usr/share/datasets/fashion-mnist"
#define TRAIN_IMAGES "train-images-idx3-ubyte.gz"

static char out[1 << 14];

/* strata-train @p args exits 2, its output holding @p needle and no training. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

/* A copy of Fashion-MNIST in a fresh directory whose training images @p make replaces. */
static void data_dir(char *dir, size_t n, const char *make)
{
        char cmd[2048];

        cli_mkdtemp(dir, n, "msg");
        snprintf(cmd, sizeof(cmd), "cp " FMNIST "/*.gz %s/ && cd %s && %s", dir, dir, make);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(messages, gzip_cut_in_its_deflate_stream_is_truncated, .timeout = 60)
{
        char dir[64], args[128];

        data_dir(dir, sizeof(dir), "head -c 1000000 " FMNIST "/" TRAIN_IMAGES " > " TRAIN_IMAGES);
        snprintf(args, sizeof(args), "--data %s --epochs 1", dir);
        refused(args, TRAIN_IMAGES ": truncated: the gzip stream is cut");
        cr_assert_null(strstr(out, "corrupt gzip"), "%s", out);
        cli_rmtree(dir);
}

/* Both training files of a copy of Fashion-MNIST claim @p n samples (their data unchanged). */
static void claims(char *dir, size_t size, long n)
{
        char make[512];

        snprintf(make, sizeof(make), "for f in train-images-idx3-ubyte train-labels-idx1-ubyte; "
                 "do gzip -dc $f.gz | python3 -c 'import sys; d=sys.stdin.buffer.read(); "
                 "sys.stdout.buffer.write(d[:4]+(%ld).to_bytes(4,\"big\")+d[8:])' > $f; "
                 "gzip -c $f > $f.gz; done", n);
        data_dir(dir, size, make);
}

/*
 * Headers that claim more samples than the files hold: called truncated, before any memory
 * comparison, whether the size alone tells (100 million images: more than the gzip file can
 * hold, or the plain file holds) or the file must be read through (1 million images under a
 * memory limit they would exceed).
 */
Test(messages, header_claiming_more_than_the_file_is_truncated, .timeout = 90)
{
        char dir[64], args[128], cmd[256];

        claims(dir, sizeof(dir), 100000000);
        snprintf(args, sizeof(args), "--data %s --epochs 1", dir);
        refused(args, TRAIN_IMAGES ": truncated: its header claims 78400000000 bytes of data; "
                      "the gzip file of");
        snprintf(cmd, sizeof(cmd), "cd %s && mv train-images-idx3-ubyte " TRAIN_IMAGES, dir);
        cr_assert_eq(system(cmd), 0);
        refused(args, TRAIN_IMAGES ": truncated: its header claims 78400000000 bytes of data; "
                      "the plain file of 47040016 bytes holds fewer");
        cli_rmtree(dir);
        if (STRATA_SAN[0])
                cr_skip("a sanitizer reserves more address space than the limit; plain build");
        claims(dir, sizeof(dir), 1000000);
        snprintf(cmd, sizeof(cmd), "ulimit -v 700000; " BIN " --data %s --epochs 1 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, TRAIN_IMAGES ": truncated: 47040000 of the 784000000 "
                                       "bytes"), "%s", out);
        cr_assert_null(strstr(out, "the data needs"), "the file first, not memory: %s", out);
        cli_rmtree(dir);
}

Test(messages, synthetic_with_too_many_classes)
{
        refused("--synthetic 1000 --model 784-16-300", "--synthetic: the model's 300 outputs");
        refused("--synthetic 1000 --model 784-16-300", "2..256");
        cr_assert_null(strstr(out, "bad argument"), "%s", out);
}

Test(messages, data_naming_a_regular_file)
{
        refused("--data /etc/hostname", "--data /etc/hostname: is not a directory");
}

Test(messages, training_label_beyond_the_outputs_named)
{
        refused("--model 784-16-5 --epochs 1",
                "train-labels-idx1-ubyte.gz: label 9 at index 0 is outside the model's 5 "
                "outputs");
}
