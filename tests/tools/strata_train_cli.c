/* strata-train: bad input exits 2 with one clear message; a real run reports what it promises. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "strata/strata.h"
#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define FMNIST "/usr/share/datasets/fashion-mnist"

static int run(const char *args, char *out, size_t n)
{
        return cli_run(BIN, args, out, n);
}

static void expect_usage_error(const char *args, const char *needle)
{
        char out[8192];

        cr_assert_eq(run(args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(strata_train_cli, bad_options_exit_2)
{
        expect_usage_error("--epochs 0", "--epochs");
        expect_usage_error("--epochs -3", "--epochs");
        expect_usage_error("--batch abc", "--batch");
        expect_usage_error("--lr 0", "--lr");
        expect_usage_error("--lr nan", "--lr");
        expect_usage_error("--optim rmsprop", "--optim");
        expect_usage_error("--model 784-x-10", "--model");
        expect_usage_error("--model 100-10", "input width");
        expect_usage_error("--frobnicate", "unknown");
        expect_usage_error("--strategy ring", "--strategy");
        expect_usage_error("--lr-schedule linear", "--lr-schedule");
        expect_usage_error("--lr-schedule step:0:0.5", "step_size");
        expect_usage_error("--lr-schedule cosine:1", "lr_min");
        expect_usage_error("--warmup -1", "--warmup");
        expect_usage_error("--dropout 1.5", "--dropout");
        expect_usage_error("--batch 16000000 --model 784-65536-65536-10", "needs");
        expect_usage_error("--accelerator tpu", "--accelerator");
        expect_usage_error("--precision bf16", "--precision");
        expect_usage_error("--precision", "--precision");
        expect_usage_error("--grad-allreduce f16", "--grad-allreduce");
        expect_usage_error("--accumulate-reduce sometimes", "--accumulate-reduce: 'sometimes' "
                                                            "is not window or each");
        expect_usage_error("--strategy dp --devices 2 --grad-allreduce bf16", "not under dp");
        /* Refused before training instead of failing (or doing nothing) late. */
        expect_usage_error("--synthetic 2048 --batch 64 --accumulate 33", "longer than an epoch's 32 batches");
}

/* Without a usable GPU, asking for one is a clear error before any work. */
Test(strata_train_cli, cuda_without_gpu_exit_2)
{
        const struct strata_device_ops *d;

        if (strata_device_driver(STRATA_ACCEL_CUDA, &d) == STRATA_OK)
                cr_skip("a GPU is present here");
        expect_usage_error("--accelerator cuda --synthetic 256 --epochs 1", "cuda");
}

/*
 * On a GPU a run trains, exits 0 and reports the heap calls the CUDA libraries made during
 * it (decision 0051: the first GPU lent showed ~50 000, none from Strata's driver).
 */
Test(strata_train_cli, cuda_run_reports_library_heap_calls, .timeout = 120)
{
        const struct strata_device_ops *d;
        char out[8192];

        if (strata_device_driver(STRATA_ACCEL_CUDA, &d) != STRATA_OK)
                cr_skip("no usable CUDA GPU here: %s", strata_last_error());
        cr_assert_eq(run("--accelerator cuda --synthetic 1280 --batch 128 --epochs 1 --json", out,
                         sizeof(out)),
                     0, "%s", out);
        cr_assert_not_null(strstr(out, "\"kernels\":\"cublas\""), "%s", out);
        cr_assert_not_null(strstr(out, "\"heap_allocs\":"), "%s", out);
        if (!strstr(out, "\"heap_allocs\":0,") && !strstr(out, "\"heap_allocs\":0}"))
                cr_assert_not_null(strstr(out, "made inside the CUDA libraries"), "%s", out);
}

Test(strata_train_cli, bad_data_exit_2)
{
        char dir[64] = "/tmp/strata-cli-XXXXXX", cmd[1024], args[256];

        expect_usage_error("--data /nonexistent/dir", "/nonexistent/dir");
        cr_assert_not_null(mkdtemp(dir));
        /* A truncated training image file beside good labels and test files. */
        snprintf(cmd, sizeof(cmd),
                 "cp " FMNIST "/*.gz %s/ && gzip -dc " FMNIST "/train-images-idx3-ubyte.gz | "
                 "head -c 1000000 | gzip > %s/train-images-idx3-ubyte.gz", dir, dir);
        cr_assert_eq(system(cmd), 0);
        snprintf(args, sizeof(args), "--data %s", dir);
        expect_usage_error(args, "truncated");
        /* Corrupt gzip: a byte flipped in the middle of the stream. */
        snprintf(cmd, sizeof(cmd),
                 "cp " FMNIST "/train-images-idx3-ubyte.gz %s/ && printf '\\377\\377\\377\\377' | "
                 "dd of=%s/train-images-idx3-ubyte.gz bs=1 seek=200000 conv=notrunc 2>/dev/null",
                 dir, dir);
        cr_assert_eq(system(cmd), 0);
        expect_usage_error(args, "train-images");
        /* Label count that does not match the images. */
        snprintf(cmd, sizeof(cmd),
                 "cp " FMNIST "/train-images-idx3-ubyte.gz %s/ && cp " FMNIST
                 "/t10k-labels-idx1-ubyte.gz %s/train-labels-idx1-ubyte.gz", dir, dir);
        cr_assert_eq(system(cmd), 0);
        expect_usage_error(args, "labels");
        /* A test split that disagrees with the training split: refused before training. The
         * test images cut to 27 x 28 pixels (the header's rows patched, the payload cut to
         * match), and test labels up to class 10 with a 10-output model. */
        snprintf(cmd, sizeof(cmd),
                 "cp " FMNIST "/*.gz %s/ && gzip -dc " FMNIST "/t10k-images-idx3-ubyte.gz | "
                 "python3 -c 'import sys; d=sys.stdin.buffer.read(); n=10000; "
                 "h=d[:8]+bytes([0,0,0,27])+d[12:16]; "
                 "sys.stdout.buffer.write(h+d[16:16+n*27*28])' | gzip > "
                 "%s/t10k-images-idx3-ubyte.gz", dir, dir);
        cr_assert_eq(system(cmd), 0);
        expect_usage_error(args, "the test images (");
        expect_usage_error(args, "t10k-images-idx3-ubyte.gz) have 756 features each, the "
                                 "training images (");
        expect_usage_error(args, "train-images-idx3-ubyte.gz) 784");
        snprintf(cmd, sizeof(cmd),
                 "cp " FMNIST "/*.gz %s/ && gzip -dc " FMNIST "/t10k-labels-idx1-ubyte.gz | "
                 "python3 -c 'import sys; d=bytearray(sys.stdin.buffer.read()); d[8]=10; "
                 "sys.stdout.buffer.write(d)' | gzip > %s/t10k-labels-idx1-ubyte.gz", dir, dir);
        cr_assert_eq(system(cmd), 0);
        expect_usage_error(args, "t10k-labels-idx1-ubyte.gz: label 10 at index 0 is outside "
                                 "the model's 10 outputs");
        cli_rmtree(dir);
}

Test(strata_train_cli, real_data_one_epoch_json, .timeout = 300)
{
        static char out[1 << 16];
        const char *final;
        double acc;
        long heap;

        cr_assert_eq(run("--epochs 1 --json", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"epoch\":1,"), "%s", out);
        final = strstr(out, "\"final\":true");
        cr_assert_not_null(final, "%s", out);
        for (const char *k = "train_loss\0test_acc\0samples_per_s\0step_us_median\0"
                             "step_cpu_us_median\0arena_bytes_planned\0arena_bytes_used\0heap_allocs\0";
             *k; k += strlen(k) + 1) {
                char key[64];

                snprintf(key, sizeof(key), "\"%s\":", k);
                cr_assert_not_null(strstr(final, key), "missing %s", k);
        }
        acc = atof(strstr(final, "\"test_acc\":") + 11);
        heap = atol(strstr(final, "\"heap_allocs\":") + 14);
        cr_assert_geq(acc, 0.80, "one epoch of Fashion-MNIST should reach 0.80, got %g", acc);
        cr_assert(heap == 0 || (heap == -1 && STRATA_SAN[0]), "heap allocations: %ld", heap);
}

/* The value of @p name in @p out's final JSON line, as printed (the test fails without it). */
static void final_field(const char *out, const char *name, char *val, size_t n)
{
        const char *f = strstr(out, "\"final\":true"), *v;
        char key[64];

        snprintf(key, sizeof(key), "\"%s\":", name);
        v = f ? strstr(f, key) : NULL;
        cr_assert_not_null(v, "no %s in %s", name, out);
        v += strlen(key);
        snprintf(val, n, "%.*s", (int)strcspn(v, ",}"), v);
}

/*
 * --activation: every choice trains with planned = used and no heap call (none: Linears
 * only); relu is the default and gives the same figures; an unknown name exits 2.
 */
Test(strata_train_cli, activation_choices, .timeout = 180)
{
        static const char *names[] = { "relu", "tanh", "sigmoid", "gelu", "gelu-tanh", "silu",
                                       "leaky-relu", "none" };
        static char out[1 << 14], def[1 << 14];
        const char *base = "--synthetic 512 --batch 64 --epochs 1 --strategy single --json";
        char args[256], a[64], b[64];

        cr_assert_eq(run(base, def, sizeof(def)), 0, "%s", def);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                snprintf(args, sizeof(args), "%s --activation %s", base, names[i]);
                cr_assert_eq(run(args, out, sizeof(out)), 0, "%s -> %s", args, out);
                final_field(out, "arena_bytes_planned", a, sizeof(a));
                final_field(out, "arena_bytes_used", b, sizeof(b));
                cr_assert_str_eq(a, b, "%s: planned and used differ", names[i]);
                final_field(out, "heap_allocs", a, sizeof(a));
                cr_assert(!strcmp(a, "0") || STRATA_SAN[0], "%s: %s heap calls", names[i], a);
                if (i)
                        continue;
                final_field(out, "train_loss", a, sizeof(a));
                final_field(def, "train_loss", b, sizeof(b));
                cr_assert_str_eq(a, b, "--activation relu is not the default");
        }
        expect_usage_error("--activation swish", "--activation");
        expect_usage_error("--activation", "--activation");
}

/*
 * No heap call during training whichever CPU kernel set runs (each in its own process), and
 * the --json names the set: native, portable (where the CPU has AVX2) and scalar.
 */
Test(strata_train_cli, no_heap_with_any_kernel_set, .timeout = 120)
{
        static const char *sets[] = { "native", "portable", "scalar" };
        static char out[1 << 14];

        if (STRATA_SAN[0])
                cr_skip_test("sanitizer builds own malloc: the counter is unavailable");
        for (int t = 0; t < 3; t++) {
                const char *want = strata_kernel_set((enum strata_kernels)(t ? t * 2 - 1 : 0),
                                                     STRATA_F32);

                for (int s = 0; s < 2 && want; s++) {
                        char args[256], name[96];
                        const char *final;

                        snprintf(args, sizeof(args),
                                 "--synthetic 2048 --raw-pixels --epochs 1 --batch 32 --json "
                                 "--strategy %s --devices %d --kernels %s",
                                 s ? "ddp" : "single", s ? 2 : 1, sets[t]);
                        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s: %s", args, out);
                        final = strstr(out, "\"heap_allocs\":");
                        cr_assert_not_null(final, "%s", out);
                        cr_assert_eq(atol(final + 14), 0, "%s: %s", args, out);
                        snprintf(name, sizeof(name), "\"kernels\":\"%s\"", want);
                        cr_assert(strstr(out, name), "%s: no %s in %s", args, name, out);
                }
        }
}

/* The "epoch 2" JSON line of a run's output (without its timing fields). */
static void epoch2(const char *out, char *line, size_t n)
{
        const char *p = strstr(out, "{\"epoch\":2,");
        const char *e = p ? strstr(p, ",\"samples_per_s\"") : NULL;

        cr_assert(p && e, "no epoch 2 line in: %s", out);
        snprintf(line, n, "%.*s", (int)(e - p), p);
}

/* The final object's train_loss and test_acc fields. */
static void final_result(const char *out, char *res, size_t n)
{
        const char *p = strstr(out, "{\"final\":true");
        const char *a = p ? strstr(p, "\"train_loss\":") : NULL;
        const char *e = a ? strstr(a, ",\"time_s\"") : NULL;

        cr_assert(a && e, "no final result in: %s", out);
        snprintf(res, n, "%.*s", (int)(e - a), a);
}

/* 2 epochs straight == 1 epoch, checkpoint, resume for the second (dp, SyncBatchNorm). */
Test(strata_train_cli, resume_continues_bitwise, .timeout = 120)
{
        static char out[16384];
        char dir[] = "/tmp/strata-cli-ckpt-XXXXXX", args[512], a[256], b[256], result[128];
        const char *common = "--model 784-64-10 --bn --sync-bn --strategy dp --devices 2 --json";

        cr_assert_not_null(mkdtemp(dir));
        snprintf(args, sizeof(args), "%s --epochs 2", common);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        epoch2(out, a, sizeof(a));
        snprintf(args, sizeof(args), "%s --epochs 1 --ckpt-dir %s", common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "\"heap_allocs\":0") ||
                  (STRATA_SAN[0] && strstr(out, "\"heap_allocs\":-1")),
                  "saving allocated: %s", out); /* sanitizers own malloc: not counted (-1) */
        final_result(out, result, sizeof(result));
        snprintf(args, sizeof(args), "%s --epochs 2 --resume %s", common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "{\"epoch\":1,"), "epoch 1 ran again: %s", out);
        epoch2(out, b, sizeof(b));
        cr_assert_str_eq(a, b);
        /* What cannot be resumed is refused before any training. */
        snprintf(args, sizeof(args), "--model 784-64-10 --epochs 2 --resume %s", dir);
        cr_assert_eq(run(args, out, sizeof(out)), 2, "%s", out);
        cr_assert(strstr(out, "another model: a batchnorm1d at module 1 (after module 0, "
                              "linear) in the checkpoint, none in this model"), "%s", out);
        snprintf(args, sizeof(args), "%s --optim adamw --epochs 2 --resume %s", common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 2, "%s", out);
        cr_assert(strstr(out, "sgd with momentum (momentum_buffer) in the checkpoint, adamw"),
                  "%s", out);
        snprintf(args, sizeof(args), "--model 784-32-10 --bn --sync-bn --strategy dp --devices 2 "
                 "--epochs 2 --resume %s", dir);
        cr_assert_eq(run(args, out, sizeof(out)), 2, "%s", out);
        cr_assert(strstr(out, "layers.0.weight (64 x 784) in the checkpoint, layers.0.weight "
                              "(32 x 784) in this model"), "%s", out);
        /* A requeued job that had finished: exit 0 and its result, nothing trained. */
        snprintf(args, sizeof(args), "%s --epochs 1 --resume %s", common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "already holds 1 epoch ("), "%s", out);
        cr_assert_null(strstr(out, "{\"epoch\":"), "%s", out);
        cr_assert_not_null(strstr(out, result), "%s: %s", result, out);
        snprintf(args, sizeof(args), "%s --epochs 2 --resume %s/nothing", common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 2, "%s", out);
        cr_assert_null(strstr(out, "{\"epoch\":"), "%s", out);
        cli_rmtree(dir);
}

/*
 * SIGTERM (a scheduler's warning) checkpoints at the next step boundary and exits 143; the
 * resumed run's next epoch is the one an uninterrupted run gives; a mid-epoch step
 * checkpoint resumes the same way.
 */
Test(strata_train_cli, sigterm_checkpoints_and_mid_epoch_resume, .timeout = 180)
{
        static char out[32768];
        char dir[] = "/tmp/strata-cli-sig-XXXXXX", cmd[1024], args[512], a[256], b[256];
        const char *common = "--model 784-64-10 --dropout 0.1 --strategy ddp --devices 2 --json";
        char name[128] = "";
        int e, rc;

        cr_assert_not_null(mkdtemp(dir));
        snprintf(cmd, sizeof(cmd), "%s %s --epochs 40 --ckpt-dir %s >/dev/null 2>&1 & p=$!; "
                 "sleep 1.5; kill -TERM $p; wait $p", BIN, common, dir);
        rc = system(cmd);
        cr_assert(WIFEXITED(rc) && WEXITSTATUS(rc) == 143, "exit status %d", rc);
        e = cli_resume_epoch(dir, name, sizeof(name));
        snprintf(args, sizeof(args), "%s --epochs %d", common, e);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, e, a, sizeof(a));
        snprintf(args, sizeof(args), "%s --epochs %d --resume %s", common, e, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, e, b, sizeof(b));
        cr_assert_str_eq(a, b, "after SIGTERM at %s", name);
        cli_rmtree(dir);

        /* A step checkpoint in the middle of epoch 2 of a fresh directory. */
        snprintf(dir + strlen(dir) - 6, 7, "XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(args, sizeof(args), "%s --epochs 1 --ckpt-dir %s --ckpt-every-steps 150",
                 common, dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        snprintf(args, sizeof(args), "%s --epochs 1 --resume %s/epoch-1-step-300.ckpt", common,
                 dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, 1, b, sizeof(b));
        snprintf(args, sizeof(args), "%s --epochs 1", common);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cli_epoch_line(out, 1, a, sizeof(a));
        cr_assert_str_eq(a, b, "resumed from a step checkpoint");
        cli_rmtree(dir);
        cr_assert_eq(run("--ckpt-every-steps 7 --accumulate 2", out, sizeof(out)), 2, "%s",
                     out);
        cr_assert(strstr(out, "needs --ckpt-dir"), "%s", out);
}

/* Results that cannot be written are an error with a message, not a silent success. */
Test(strata_train_cli, unwritable_or_closed_stdout_fails)
{
        char out[4096];

        cr_assert_eq(cli_sh(BIN " --synthetic 2048 --epochs 1 2>&1 >/dev/full", out,
                            sizeof(out)), 1, "%s", out);
        cr_assert_not_null(strstr(out, "writing the results to stdout failed"), "%s", out);
        cr_assert_eq(cli_sh(BIN " --synthetic 2048 --epochs 1 2>&1 >&-", out, sizeof(out)), 2,
                         "%s", out);
        cr_assert_not_null(strstr(out, "stdout is closed"), "%s", out);
}

/* A diverging run stops naming the step; allowed to go on, --json stays valid JSON (null). */
Test(strata_train_cli, nonfinite_loss_stops_and_json_stays_valid)
{
        const char *args = "--synthetic 2048 --epochs 2 --lr 1e6 --momentum 0.99 --batch 64 "
                           "--model 784-32-10";
        char out[8192], cmd[1024];
        FILE *f;

        cr_assert_eq(run(args, out, sizeof(out)), 1, "%s", out);
        cr_assert_not_null(strstr(out, "the loss is"), "%s", out);
        cr_assert_not_null(strstr(out, "step "), "%s", out);
        snprintf(cmd, sizeof(cmd), "%s %s --allow-nonfinite --json", BIN, args);
        f = popen(cmd, "r");
        cr_assert_not_null(f);
        {
                size_t got = fread(out, 1, sizeof(out) - 1, f);

                out[got] = '\0';
        }
        cr_assert_eq(pclose(f), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"train_loss\":null"), "%s", out);
        snprintf(cmd, sizeof(cmd), "%s %s --allow-nonfinite --json | /usr/bin/python3 -c "
                                   "'import json,sys; [json.loads(l) for l in sys.stdin]'",
                 BIN, args);
        cr_assert_eq(system(cmd), 0, "--json printed something that is not JSON");
}

/* Data that would not fit the process's memory limit is refused before it is generated. */
Test(strata_train_cli, data_beyond_the_memory_limit_refused_before_generation)
{
        char out[4096];

        if (STRATA_SAN[0] != '\0')
                cr_skip("a sanitizer reserves more address space than the limit; plain build");
        cr_assert_eq(cli_sh("ulimit -v 2000000; " BIN " --synthetic 5000000 --epochs 1 2>&1",
                            out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "the address-space limit (ulimit -v) is 2048000000"),
                           "%s", out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

/*
 * A data set larger than Fashion-MNIST's 70 000 samples trains: the tool's own buffers are
 * sized from the data (a fixed 70 000-sample budget made this fail with "memory region too
 * small"). The training split here is Fashion-MNIST's twice over: 120 000 samples, plain IDX.
 */
Test(strata_train_cli, data_set_larger_than_fashion_mnist_trains, .timeout = 120)
{
        char dir[64] = "/tmp/strata-big-XXXXXX", cmd[2048], args[256], out[8192];

        cr_assert_not_null(mkdtemp(dir));
        snprintf(cmd, sizeof(cmd),
                 "cd %s && cp " FMNIST "/t10k-*.gz . && /usr/bin/python3 -c '"
                 "import gzip; d=\"" FMNIST "/\"; n=(120000).to_bytes(4, \"big\")\n"
                 "x=gzip.open(d+\"train-images-idx3-ubyte.gz\").read()\n"
                 "y=gzip.open(d+\"train-labels-idx1-ubyte.gz\").read()\n"
                 "open(\"train-images-idx3-ubyte.gz\",\"wb\").write(x[:4]+n+x[8:16]+x[16:]*2)\n"
                 "open(\"train-labels-idx1-ubyte.gz\",\"wb\").write(y[:4]+n+y[8:]*2)'",
                 dir);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        snprintf(args, sizeof(args), "--data %s --epochs 1 --batch 1024 --model 784-16-10 --json",
                 dir);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"final\":true"), "%s", out);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        (void)!system(cmd);
}

/* SIGINT: the current step finishes, the run's summary is printed, the exit status is 130. */
Test(strata_train_cli, sigint_prints_the_summary_and_exits_130, .timeout = 60)
{
        char out[8192];

        cr_assert_eq(cli_sh(BIN " --epochs 40 --synthetic 20000 --json 2>&1 & p=$!; sleep 1; "
                                "kill -INT $p; wait $p",
                            out, sizeof(out)), 130, "%s", out);
        cr_assert_not_null(strstr(out, "{\"final\":true,\"stopped\":\"INT\""), "%s", out);
        cr_assert_not_null(strstr(out, "\"step_us_median\":"), "%s", out);
        cr_assert_not_null(strstr(out, "Interrupt at epoch"), "%s", out);
}

/*
 * --accumulate-reduce each where it changes nothing (one micro-batch a step, or invariant
 * mode) warns on stderr, once, and trains; with accumulation it is quiet.
 */
Test(strata_train_cli, accumulate_reduce_each_without_effect_warns, .timeout = 180)
{
        static char out[1 << 15];
        const char *warn = "strata-train: warning: --accumulate-reduce each has no effect";
        const char *base = "--synthetic 512 --batch 64 --epochs 1 --strategy ddp --devices 2 "
                           "--quiet --accumulate-reduce each ";
        char args[512];
        const char *p;

        snprintf(args, sizeof(args), "%s", base);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s -> %s", args, out);
        p = strstr(out, warn);
        cr_assert_not_null(p, "%s -> %s", args, out);
        cr_assert_not_null(strstr(p, "without --accumulate N > 1\n"), "%s", out);
        cr_assert_null(strstr(p + 1, warn), "warned twice: %s", out);
        snprintf(args, sizeof(args), "%s--accumulate 2 --invariant", base);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s -> %s", args, out);
        p = strstr(out, warn);
        cr_assert_not_null(p, "%s -> %s", args, out);
        cr_assert_not_null(strstr(p, "with --invariant"), "%s", out);
        snprintf(args, sizeof(args), "%s--accumulate 2", base);
        cr_assert_eq(run(args, out, sizeof(out)), 0, "%s -> %s", args, out);
        cr_assert_null(strstr(out, "warning"), "%s -> %s", args, out);
}
