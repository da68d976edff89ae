/*
 * strata-train's weights in and out: --export-initial writes the weights before the first
 * step, --init-weights starts from a safetensors file (the run that loads a file exports it
 * again as its initial weights; two runs from the same file are bitwise the same; fsdp's, in
 * one process or across two, is ddp's), --init-weights-partial loads what fits and lists the rest, --shuffle off keeps the
 * data's order; each wrong use is refused with exit 2 and a message before training.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic-regression 256 --loss mse --batch 32 --epochs 1 --seed 5 "

static char out[1 << 14];

/* Run RUN @p args (dir substituted for every %s, at most 3); its exit status. */
static int run(const char *dir, const char *args)
{
        char cmd[2048], a[1024];

        snprintf(a, sizeof(a), args, dir, dir, dir);
        snprintf(cmd, sizeof(cmd), RUN "%s 2>&1", a);
        return cli_sh(cmd, out, sizeof(out));
}

Test(strata_train_weights, initial_and_init_round_trip, .timeout = 300)
{
        char dir[256];

        cli_mkdtemp(dir, sizeof(dir), "train-weights");
        cr_assert_eq(run(dir, "--model 16-32-4 --strategy ddp --devices 2 --quiet "
                         "--export-initial %s/init.st --export-safetensors %s/final.st"), 0,
                     "%s", out);
        /* a run that loads a file starts from it */
        cr_assert_eq(run(dir, "--model 16-32-4 --strategy ddp --devices 2 --init-weights "
                         "%s/final.st --export-initial %s/again.st --export-safetensors "
                         "%s/a.st"), 0, "%s", out);
        cr_assert_not_null(strstr(out, "final.st: 4 groups loaded"), "%s", out);
        cli_same_files(dir, "final.st", "again.st");
        /* loaded twice: the same run; under fsdp the same as under ddp */
        cr_assert_eq(run(dir, "--model 16-32-4 --strategy ddp --devices 2 --init-weights "
                         "%s/final.st --export-safetensors %s/b.st"), 0, "%s", out);
        cli_same_files(dir, "a.st", "b.st");
        cr_assert_eq(run(dir, "--model 16-32-4 --strategy fsdp --devices 2 --init-weights "
                         "%s/final.st --export-safetensors %s/c.st"), 0, "%s", out);
        cli_same_files(dir, "a.st", "c.st");
        /* across processes: each loads its shard, and the file is the first run's */
        cli_serial_jobs();
        cr_assert_eq(run(dir, "--model 16-32-4 --strategy fsdp --processes 2 --devices 1 "
                         "--init-weights %s/final.st --export-initial %s/p0.st "
                         "--export-safetensors %s/p.st"), 0, "%s", out);
        cli_same_files(dir, "final.st", "p0.st");
        cli_same_files(dir, "a.st", "p.st");
        cli_rmtree(dir);
}

Test(strata_train_weights, shuffle_off_keeps_the_order, .timeout = 300)
{
        char dir[256], cmd[1024];

        cli_mkdtemp(dir, sizeof(dir), "train-shuffle");
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--export-initial %s/init.st"), 0, "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--shuffle off --init-weights %s/init.st --export-safetensors "
                         "%s/off.st"), 0, "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--shuffle off --init-weights %s/init.st --export-safetensors "
                         "%s/off2.st"), 0, "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--shuffle on --init-weights %s/init.st --export-safetensors "
                         "%s/on.st"), 0, "%s", out);
        cli_same_files(dir, "off.st", "off2.st");
        snprintf(cmd, sizeof(cmd), "cmp -s %s/off.st %s/on.st", dir, dir);
        cr_assert_neq(cli_sh(cmd, out, sizeof(out)), 0, "shuffled, another order");
        cli_rmtree(dir);
}

Test(strata_train_weights, mismatch_partial_and_refusals, .timeout = 300)
{
        char dir[256];

        cli_mkdtemp(dir, sizeof(dir), "train-weights-bad");
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--export-initial %s/init.st"), 0, "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-3 --devices 1 --strategy single "
                         "--init-weights %s/init.st"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "layers.2.weight: file [4, 32] F32, model [3, 32]; "
                                       "layers.2.bias: file [4] F32, model [3]"), "%s", out);
        cr_assert_null(strstr(out, "epoch 1"), "refused before training: %s", out);
        cr_assert_eq(run(dir, "--model 16-32-3 --devices 1 --strategy single "
                         "--init-weights-partial %s/init.st"), 0, "%s", out);
        cr_assert_not_null(strstr(out, "init.st: 2 groups loaded"), "%s", out);
        cr_assert_not_null(strstr(out, "left as initialised (0 missing, 2 of another shape, 0 "
                                       "not in the model): layers.2.weight"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --init-weights %s/none.st"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--init-weights"), "%s", out);
        cr_assert_not_null(strstr(out, "No such file"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --init-weights %s"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "is not a regular file"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --init-weights %s/init.st --resume %s/x"), 2,
                     "%s", out);
        cr_assert_not_null(strstr(out, "both give the starting weights"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --export-initial %s/no/such/init.st"), 2, "%s",
                     out);
        cr_assert_not_null(strstr(out, "does not exist"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --export-initial %s"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "is a directory"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --shuffle maybe"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--shuffle: 'maybe' is not on or off"), "%s", out);
        cli_rmtree(dir);
}

/* The metadata value @p key of safetensors file @p path into @p out (Python's json reads it). */
static void meta_value(const char *path, const char *key, char *val, size_t n)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c 'import json,struct,sys; "
                 "b=open(sys.argv[1],\"rb\").read(); n=struct.unpack(\"<Q\",b[:8])[0]; "
                 "print(json.loads(b[8:8+n])[\"__metadata__\"][sys.argv[2]], end=\"\")' %s %s",
                 path, key);
        cr_assert_eq(cli_sh(cmd, val, n), 0, "%s", val);
}

Test(strata_train_weights, export_stores_model_line_and_transform, .timeout = 300)
{
        static char line[2048], tr[512], cmd[4096];
        char dir[256];

        cli_mkdtemp(dir, sizeof(dir), "train-meta");
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --epochs 1 --devices 1 --strategy "
                 "single --bn --dropout 0.1 --export-safetensors %s/a.st 2>&1", dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "a.st: model input(784) linear(256) batchnorm1d relu "
                                       "dropout(0.1) linear(128) batchnorm1d relu dropout(0.1) "
                                       "linear(10); input transform standardize mean="), "%s",
                           out);
        meta_value(cli_path(dir, "a.st"), "strata.model", line, sizeof(line));
        meta_value(cli_path(dir, "a.st"), "strata.transform", tr, sizeof(tr));
        cr_assert_eq(strncmp(tr, "standardize mean=", 17), 0, "%s", tr);
        cr_assert_not_null(strstr(tr, "(byte / 255 - mean) / std"), "%s", tr);
        /* the stored line builds the same model: the same run, the same file */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --epochs 1 --devices 1 --strategy "
                 "single --model '%s' --export-safetensors %s/b.st --quiet 2>&1", line, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cli_same_files(dir, "a.st", "b.st");
        /* a load prints them; --raw-pixels stores its own transform */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --epochs 1 --devices 1 --strategy "
                 "single --bn --dropout 0.1 --raw-pixels --init-weights %s/a.st "
                 "--export-initial %s/c.st 2>&1", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "the file's model: input(784) linear(256)"), "%s", out);
        cr_assert_not_null(strstr(out, "the file's input transform: standardize mean="), "%s",
                           out);
        meta_value(cli_path(dir, "c.st"), "strata.transform", tr, sizeof(tr));
        cr_assert_str_eq(tr, "none (x = byte / 255)");
        /* float arrays are used as they are */
        cr_assert_eq(run(dir, "--model 16-32-4 --devices 1 --strategy single --quiet "
                         "--export-initial %s/d.st"), 0, "%s", out);
        meta_value(cli_path(dir, "d.st"), "strata.transform", tr, sizeof(tr));
        cr_assert_str_eq(tr, "none");
        meta_value(cli_path(dir, "d.st"), "strata.model", line, sizeof(line));
        cr_assert_str_eq(line, "input(16) linear(32) relu linear(4)");
        cli_rmtree(dir);
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

Test(strata_train_weights, evaluate_reports_what_training_reported, .timeout = 300)
{
        static char cmd[2048], final[4096], name[128];
        char dir[256], acc[32], loss[32], v[64];
        FILE *f;

        cli_mkdtemp(dir, sizeof(dir), "train-evaluate");
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --epochs 2 --devices 2 --strategy ddp "
                 "--bn --optim adamw --lr 1e-3 --ckpt-dir %s/c --export-safetensors %s/w.st "
                 "--json 2>&1 | tail -1", dir, dir);
        cr_assert_eq(cli_sh(cmd, final, sizeof(final)), 0, "%s", final);
        json_field(final, "test_acc", acc, sizeof(acc));
        json_field(final, "test_loss", loss, sizeof(loss));
        f = fopen(cli_path(dir, "c/latest"), "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(name, sizeof(name), f));
        fclose(f);
        name[strcspn(name, "\n")] = '\0';
        /* the checkpoint, with the run's options */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --devices 2 --strategy ddp --bn --optim "
                 "adamw --evaluate %s/c/%s --json 2>&1", dir, name);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "{\"evaluate\":\"checkpoint\""), "%s", out);
        json_field(out, "test_acc", v, sizeof(v));
        cr_assert_str_eq(v, acc, "%s", out);
        json_field(out, "test_loss", v, sizeof(v));
        cr_assert_str_eq(v, loss, "%s", out);
        /* the weights, under fsdp and another optimizer: the same figures */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --devices 2 --strategy fsdp --bn "
                 "--evaluate %s/w.st --export-safetensors %s/again.st 2>&1", dir, dir);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        snprintf(v, sizeof(v), "test_acc %s", acc);
        cr_assert_not_null(strstr(out, v), "%s", out);
        cr_assert_null(strstr(out, "epoch 1"), "nothing trained: %s", out);
        cli_same_files(dir, "w.st", "again.st");
        /* the checkpoint under another optimizer and strategy: its weights, the same figures */
        snprintf(cmd, sizeof(cmd), BIN " --synthetic 512 --devices 1 --strategy single --bn "
                 "--evaluate %s/c/%s 2>&1", dir, name);
        cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, v), "%s", out);
        /* refusals: a file of neither kind, with --resume, none */
        cr_assert_eq(run(dir, "--model 16-32-4 --evaluate %s/c/latest"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--evaluate: "), "%s", out);
        cr_assert_not_null(strstr(out, "safetensors"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --evaluate %s/w.st --resume %s/c"), 2, "%s",
                     out);
        cr_assert_not_null(strstr(out, "--resume has no use with it"), "%s", out);
        cr_assert_eq(run(dir, "--model 16-32-4 --evaluate %s/none.st"), 2, "%s", out);
        cr_assert_not_null(strstr(out, "No such file"), "%s", out);
        cli_rmtree(dir);
}
