/*
 * strata-train --model with two inputs and two outputs: the line trains a regression set in
 * invariant mode on one device, spawn's 2 processes, fsdp over 2 processes and (where Open
 * MPI is installed) mpi's 2 processes, to the same bits, each output's own loss too (--json);
 * and outputs written wrong are refused (exit 2) by name before anything trains.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/h5files.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define PLOT STRATA_SOURCE_DIR "/tools/strata-plot"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " \
               "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "
#define LINE "'input(6) input(4) linear(16) tanh linear(8,from=input1) relu concat(from=1) " \
             "linear(3) output(mse) linear(2,from=4) output(huber,weight=0.5)'"
#define JSON "--synthetic-regression 512 --loss mse --batch 32 --epochs 2 --json --invariant " \
             "--bind none --model " LINE
#define JOB "--synthetic-regression 512 --loss mse --batch 32 --epochs 1 --quiet --invariant " \
            "--bind none --model " LINE

static char out[1 << 16];

/* One job of processes at a time (the lock tests/strategy/processes.c takes). */
static void serial(void)
{
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);

        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
}

Test(multi_io_cli, processes_train_the_same_bits, .timeout = 300)
{
        char dir[256];

        serial();
        cli_mkdtemp(dir, sizeof(dir), "mioprocs");
        cli_train_export("", JOB " --strategy single --devices 1", dir, "one");
        cli_train_export("", JOB " --strategy ddp --devices 2", dir, "ddp2");
        cli_same_files(dir, "one", "ddp2");
        cli_train_export("", JOB " --strategy spawn --devices 2", dir, "spawn2");
        cli_same_files(dir, "one", "spawn2");
        cli_train_export("", JOB " --strategy fsdp --processes 2 --devices 1", dir, "fsdp2x1");
        cli_same_files(dir, "one", "fsdp2x1");
        if (access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
            cli_sh("command -v mpirun", out, sizeof(out)) == 0) {
                cli_train_export(MPIRUN "-np 2 ", JOB " --strategy mpi --devices 1", dir, "mpi2");
                cli_same_files(dir, "one", "mpi2");
        } else {
                cr_log_warn("mpirun or libstrata-mpi.so missing: mpi not run");
        }
        cli_rmtree(dir);
}

/* A number after @p key in @p line ("train_loss": ...), or after it and @p k commas. */
static double field(const char *line, const char *key, int k)
{
        const char *p = strstr(line, key);

        cr_assert_not_null(p, "no %s in %s", key, line);
        p += strlen(key);
        for (; k > 0; k--) {
                p = strchr(p, ',');
                cr_assert_not_null(p, "%s has no value %d: %s", key, k, line);
                p++;
        }
        return strtod(p, NULL);
}

/* strata-train --json's epoch lines (timing fields out) of @p launch with @p args. */
static void epoch_lines(const char *launch, const char *args, char (*line)[1024])
{
        char cmd[2048];
        int rc;

        snprintf(cmd, sizeof(cmd), "%s%s %s 2>&1", launch, BIN, args);
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
        for (int e = 0; e < 2; e++)
                cli_epoch_line(out, e + 1, line[e], sizeof(line[e]));
}

/*
 * --json gives each output's own loss per epoch ("train_losses") and per evaluation
 * ("test_losses"): their weighted sum is the loss, and in invariant mode one device, ddp's 2,
 * spawn's 2 processes and mpi's 2 print the same lines (the losses to the bit: 17 digits).
 * A model of one output prints no such field.
 */
Test(multi_io_cli, each_outputs_loss_the_same_on_any_split, .timeout = 300)
{
        static const char *const splits[][2] = {
                { "", "--strategy ddp --devices 2" },
                { "", "--strategy spawn --devices 2" },
                { MPIRUN "-np 2 ", "--strategy mpi --devices 1" },
        };
        char one[2][1024], other[2][1024], args[1024];

        serial();
        epoch_lines("", JSON " --strategy single --devices 1", one);
        for (int e = 0; e < 2; e++) {
                double l0 = field(one[e], "\"train_losses\":[", 0);
                double l1 = field(one[e], "\"train_losses\":[", 1);
                double t0 = field(one[e], "\"test_losses\":[", 0);
                double t1 = field(one[e], "\"test_losses\":[", 1);

                cr_assert(l0 > 0.0 && l1 > 0.0 && t0 > 0.0 && t1 > 0.0, "%s", one[e]);
                cr_assert(fabs(l0 + 0.5 * l1 - field(one[e], "\"train_loss\":", 0)) <= 1e-6,
                          "weighted train losses: %s", one[e]);
                cr_assert(fabs(t0 + 0.5 * t1 - field(one[e], "\"test_loss\":", 0)) <=
                                  1e-6 * (1.0 + t0),
                          "weighted test losses: %s", one[e]);
        }
        for (size_t i = 0; i < sizeof(splits) / sizeof(splits[0]); i++) {
                if (strstr(splits[i][1], "mpi") &&
                    !(access(STRATA_BUILD_DIR "/libstrata-mpi.so", R_OK) == 0 &&
                      cli_sh("command -v mpirun", out, sizeof(out)) == 0)) {
                        cr_log_warn("mpirun or libstrata-mpi.so missing: mpi not run");
                        continue;
                }
                snprintf(args, sizeof(args), JSON " %s", splits[i][1]);
                epoch_lines(splits[i][0], args, other);
                for (int e = 0; e < 2; e++)
                        cr_assert_str_eq(other[e], one[e], "%s, epoch %d", splits[i][1], e + 1);
        }
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --loss mse --batch 32 --epochs 1 "
                                  "--json --bind none --model 'input(4) linear(3) output(mse)'",
                             out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "_losses"), "one output: %s", out);
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --loss mse --batch 32 --epochs 1 "
                                  "--bind none --model " LINE, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "train_losses "), "the epoch line: %s", out);
        cr_assert_not_null(strstr(out, "test_losses "), "the epoch line: %s", out);
}

/*
 * A run resumed from a checkpoint inside its first epoch prints the uninterrupted run's lines,
 * each output's losses too: the checkpoint keeps each output's summed loss of the epoch.
 */
Test(multi_io_cli, each_outputs_loss_resumes, .timeout = 120)
{
        char dir[256], one[2][1024], resumed[2][1024], args[1024];

        cli_mkdtemp(dir, sizeof(dir), "mioresume");
        epoch_lines("", JSON " --strategy single --devices 1", one);
        snprintf(args, sizeof(args), JSON " --strategy single --devices 1 --ckpt-dir %s "
                 "--ckpt-every-steps 5 --ckpt-keep 8", dir);
        epoch_lines("", args, resumed);
        snprintf(args, sizeof(args), JSON " --strategy single --devices 1 --resume "
                 "%s/epoch-1-step-10.ckpt", dir);
        epoch_lines("", args, resumed);
        for (int e = 0; e < 2; e++)
                cr_assert_str_eq(resumed[e], one[e], "epoch %d", e + 1);
        cli_rmtree(dir);
}

/* strata-train @p args exits 2 with @p needle, having trained nothing. */
static void refused(const char *args, const char *needle)
{
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, needle), "%s -> %s", args, out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
}

Test(multi_io_cli, bad_outputs_are_refused_by_name, .timeout = 120)
{
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(ce)'",
                "--model's output takes labels; the data has float targets");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(xe)'",
                "output 0 (module 0): loss 'xe' is not mse, l1, huber, bce or ce");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(mse) "
                "linear(1,from=0) output(ce)'", "model output 1 (module 1): loss "
                "softmax_cross_entropy takes class labels: its module gives 1 value a row");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(mse) "
                "linear(2,from=7) output(mse)'", "module 1 (linear): branch from=7");
        refused("--synthetic-regression 256 --loss mse --model 'input(4) linear(3) output(mse) "
                "linear(2)'", "the last module (1, linear) is not one of its outputs");
}

/* Two outputs, the second under cross-entropy: its class index one value of the targets row. */
#define CE_LINE "'input(6) linear(16) tanh linear(3) output(mse) linear(4,from=1) " \
                "output(ce,weight=0.5)'"
#define CE_JSON "--synthetic-regression 512 --batch 32 --epochs 2 --json --invariant --lr 0.2 " \
                "--bind none --model " CE_LINE

/*
 * A cross-entropy output through strata-train: --synthetic-regression makes its column a class
 * index; each output's loss and the CE output's accuracy ("test_accs", null for the MSE
 * output) are printed, the weighted losses are the loss, the model learns its classes, and in
 * invariant mode one device, ddp's 2 and spawn's 2 processes print the same lines.
 */
Test(multi_io_cli, a_cross_entropy_output, .timeout = 300)
{
        char one[2][1024], other[2][1024];

        serial();
        epoch_lines("", CE_JSON " --strategy single --devices 1", one);
        for (int e = 0; e < 2; e++) {
                double l0 = field(one[e], "\"train_losses\":[", 0);
                double l1 = field(one[e], "\"train_losses\":[", 1);
                double acc = field(one[e], "\"test_accs\":[null,", 0);

                cr_assert(l0 > 0.0 && l1 > 0.0, "%s", one[e]);
                cr_assert(fabs(l0 + 0.5 * l1 - field(one[e], "\"train_loss\":", 0)) <= 1e-6,
                          "weighted train losses: %s", one[e]);
                cr_assert(acc > 0.0 && acc <= 1.0, "%s", one[e]);
        }
        cr_assert_gt(field(one[1], "\"test_accs\":[null,", 0), 0.5,
                     "the classes are learnt: %s", one[1]);
        epoch_lines("", CE_JSON " --strategy ddp --devices 2", other);
        for (int e = 0; e < 2; e++)
                cr_assert_str_eq(other[e], one[e], "ddp on 2, epoch %d", e + 1);
        epoch_lines("", CE_JSON " --strategy spawn --devices 2", other);
        for (int e = 0; e < 2; e++)
                cr_assert_str_eq(other[e], one[e], "spawn's 2, epoch %d", e + 1);
        cr_assert_eq(cli_run(BIN, "--synthetic-regression 256 --batch 32 --epochs 1 --bind none "
                                  "--model " CE_LINE, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "test_accs -,0."), "the epoch line: %s", out);
}

/* An HDF5 targets row with a class index column: trained; a value no class index refused. */
Test(multi_io_cli, class_indices_from_hdf5, .timeout = 120)
{
        static float x[64 * 6], t[64 * 4];
        unsigned long long dx[2] = { 64, 6 }, dt[2] = { 64, 4 };
        char dir[256], file[300], args[1024];

        for (int i = 0; i < 64; i++) {
                for (int j = 0; j < 6; j++)
                        x[i * 6 + j] = sinf(0.3f * (float)(i * 6 + j));
                for (int j = 0; j < 3; j++)
                        t[i * 4 + j] = cosf(0.7f * (float)(i * 4 + j));
                t[i * 4 + 3] = (float)(i % 4);
        }
        cli_mkdtemp(dir, sizeof(dir), "mioce");
        snprintf(file, sizeof(file), "%s/ce.h5", dir);
        h5w_dataset(file, "x", H5W_F32, 2, dx, x);
        h5w_dataset(file, "t", H5W_F32, 2, dt, t);
        t[9 * 4 + 3] = 1.5f;
        h5w_dataset(file, "bad", H5W_F32, 2, dt, t);
        t[9 * 4 + 3] = 4.0f;
        h5w_dataset(file, "big", H5W_F32, 2, dt, t);
        snprintf(args, sizeof(args), "--data %s --inputs x --targets t --batch 16 --epochs 1 "
                 "--bind none --model " CE_LINE, file);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s -> %s", args, out);
        cr_assert_not_null(strstr(out, "train_eval_accs -,"), "%s", out);
        snprintf(args, sizeof(args), "--data %s --inputs x --targets bad --model " CE_LINE, file);
        refused(args, "dataset 'bad': sample 9 holds 1.5 (value 3 of the sample): output 1 "
                "(cross-entropy) takes a class index, an integer in [0, 4)");
        snprintf(args, sizeof(args), "--data %s --inputs x --targets big --model " CE_LINE, file);
        refused(args, "sample 9 holds 4 (value 3 of the sample)");
        snprintf(args, sizeof(args), "--data %s --inputs x --targets t --model 'input(6) "
                 "linear(3) output(mse) linear(4,from=0) output(mse)'", file);
        refused(args, "--model: 7 outputs, but the targets have 4 values a sample");
        snprintf(args, sizeof(args), "--data %s --inputs x --targets x --model " CE_LINE, file);
        refused(args, "--model: 4 outputs, but the targets have 6 values a sample (the outputs "
                "take one class index each for cross-entropy");
        cli_rmtree(dir);
}

/* The file @p name of @p dir into @p buf (@p n bytes), a string. */
static void read_text(const char *dir, const char *name, char *buf, size_t n)
{
        FILE *f = fopen(cli_path(dir, name), "r");
        size_t got;

        cr_assert_not_null(f, "%s/%s", dir, name);
        got = fread(buf, 1, n - 1, f);
        buf[got] = '\0';
        fclose(f);
}

/* The number of comma-separated fields of @p line (up to its newline). */
static int fields_of(const char *line)
{
        int n = 1;

        for (; *line && *line != '\n'; line++)
                n += *line == ',';
        return n;
}

/*
 * --metrics-csv: a model of several outputs adds each output's training loss and evaluation
 * loss (train_loss_K, SET_loss_K; the evaluation's empty on step rows); a model of one output
 * writes the columns it always did.
 */
Test(multi_io_cli, metrics_csv_columns_per_output, .timeout = 120)
{
        static char csv[1 << 14];
        char dir[256], args[1024];
        const char *row;

        cli_mkdtemp(dir, sizeof(dir), "miocsv");
        snprintf(args, sizeof(args), "--synthetic-regression 256 --loss mse --batch 32 "
                 "--epochs 1 --bind none --quiet --log-every 4 --metrics-csv %s/m.csv --model "
                 LINE, dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        read_text(dir, "m.csv", csv, sizeof(csv));
        cr_assert(!strncmp(csv, "step,epoch,train_loss,lr,samples_per_s,test_loss,test_mse,"
                           "test_mae,train_loss_0,train_loss_1,test_loss_0,test_loss_1\n", 106),
                  "%s", csv);
        row = strchr(csv, '\n') + 1; /* step 4's row: the evaluation's columns empty */
        cr_assert_eq(fields_of(row), 12, "%s", row);
        cr_assert_not_null(strstr(row, ",,,,"), "a step row: %s", row);
        row = strstr(csv, "\n8,1,") + 1; /* the epoch's row after step 8's: every column */
        row = strchr(row, '\n') + 1;
        cr_assert_eq(fields_of(row), 12, "%s", row);
        cr_assert_null(strstr(row, ",,"), "the epoch row: %s", row);
        snprintf(args, sizeof(args), "--synthetic-regression 256 --loss mse --batch 32 "
                 "--epochs 1 --bind none --quiet --log-every 4 --metrics-csv %s/one.csv "
                 "--model 'input(4) linear(3) output(mse)'", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        read_text(dir, "one.csv", csv, sizeof(csv));
        cr_assert(!strncmp(csv, "step,epoch,train_loss,lr,samples_per_s,test_loss,test_mse,"
                           "test_mae\n", 67), "%s", csv);
        for (row = csv; *row; row = strchr(row, '\n') + 1)
                cr_assert_eq(fields_of(row), 8, "one output: %s", row);
        cli_rmtree(dir);
}

/* What follows the progress bar's total loss at its last drawing ("/128  loss 0.1234"). */
static const char *after_bar_loss(void)
{
        const char *p = strstr(out, "128/128  loss ");
        char *end;

        cr_assert_not_null(p, "no final bar: %s", out);
        strtod(p + 14, &end);
        return end;
}

/* On a terminal the progress bar shows each output's loss so far after the total's. */
Test(multi_io_cli, progress_bar_per_output, .timeout = 120)
{
        cr_assert_eq(cli_run_tty(BIN, "--synthetic-regression 4096 --loss mse --batch 32 "
                                      "--epochs 1 --bind none --model " LINE, out, sizeof(out)),
                     0, "%s", out);
        cr_assert(!strncmp(after_bar_loss(), " (0.", 4), "no outputs' losses: %s", out);
        cr_assert_eq(cli_run_tty(BIN, "--synthetic-regression 4096 --loss mse --batch 32 "
                                      "--epochs 1 --bind none --model 'input(4) linear(3)'", out,
                                 sizeof(out)), 0, "%s", out);
        cr_assert(!strncmp(after_bar_loss(), "  ", 2), "one output: %s", out);
}

/*
 * A line whose outputs all take class indices (two cross-entropy heads) has no float output:
 * its lines and metrics CSV give the loss and accuracy (each head's too), no MSE or MAE.
 */
Test(multi_io_cli, cross_entropy_outputs_alone_have_no_regression_figures, .timeout = 120)
{
        static char csv[1 << 14];
        const char *head = "step,epoch,train_loss,lr,samples_per_s,test_loss,test_acc,"
                           "train_loss_0,train_loss_1,test_loss_0,test_loss_1,"
                           "test_acc_0,test_acc_1\n";
        char dir[256], args[1024];

        cli_mkdtemp(dir, sizeof(dir), "mioceonly");
        snprintf(args, sizeof(args), "--synthetic-regression 256 --batch 32 --epochs 1 "
                 "--bind none --log-every 4 --metrics-csv %s/m.csv --model 'input(6) "
                 "linear(8) tanh linear(3) output(ce) linear(4,from=1) output(ce)'", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "_mse"), "%s", out);
        cr_assert_null(strstr(out, "_mae"), "%s", out);
        cr_assert_not_null(strstr(out, "test_acc "), "%s", out);
        cr_assert_not_null(strstr(out, "test_accs 0."), "each head's accuracy: %s", out);
        read_text(dir, "m.csv", csv, sizeof(csv));
        cr_assert(!strncmp(csv, head, strlen(head)), "%s", csv);
        cr_assert_null(strstr(csv, "mse"), "%s", csv);
        snprintf(args, sizeof(args), "--synthetic-regression 256 --batch 32 --epochs 1 "
                 "--bind none --json --model 'input(6) linear(8) tanh linear(3) output(ce) "
                 "linear(4,from=1) output(ce)'");
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "_mse"), "%s", out);
        cr_assert_not_null(strstr(out, "\"test_acc\":"), "%s", out);
        cli_rmtree(dir);
}

/* The text of @p key's JSON array ("\"test_accs\":[null,0.89...]") in the last line of out. */
static void json_array(const char *key, char *buf, size_t n)
{
        const char *p = strstr(strstr(out, "{\"final\":true"), key), *e;

        cr_assert_not_null(p, "no %s: %s", key, out);
        e = strchr(p, ']');
        cr_assert_not_null(e, "%s", out);
        snprintf(buf, n, "%.*s", (int)(e + 1 - p), p);
}

/*
 * --metrics-csv: each cross-entropy output's evaluation accuracy (SET_acc_K, K its output; no
 * column for a float output) after the losses, empty on step rows, the --json line's value to
 * 4 digits on epoch rows; strata-plot draws it.
 */
Test(multi_io_cli, metrics_csv_accuracy_per_ce_output, .timeout = 120)
{
        static char csv[1 << 14];
        char dir[256], args[1024], accs[256], want[64];
        const char *row;
        FILE *f;

        cli_mkdtemp(dir, sizeof(dir), "mioaccs");
        snprintf(args, sizeof(args), CE_JSON " --epochs 1 --log-every 4 --metrics-csv %s/m.csv",
                 dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        json_array("\"test_accs\":[null,", accs, sizeof(accs));
        snprintf(want, sizeof(want), ",%.4f\n", strtod(accs + strlen("\"test_accs\":[null,"),
                                                       NULL));
        read_text(dir, "m.csv", csv, sizeof(csv));
        cr_assert(!strncmp(csv, "step,epoch,train_loss,lr,samples_per_s,test_loss,test_mse,"
                           "test_mae,train_loss_0,train_loss_1,test_loss_0,test_loss_1,"
                           "test_acc_1\n", 118), "%s", csv);
        row = strchr(csv, '\n') + 1; /* step 4's row */
        cr_assert_eq(fields_of(row), 13, "%s", row);
        cr_assert(!strncmp(strchr(row, '\n') - 3, ",,,\n", 4), "a step row: %s", row);
        row = strstr(csv, "\n16,1,") + 1; /* the epoch's row follows step 16's */
        row = strchr(row, '\n') + 1;
        cr_assert_eq(fields_of(row), 13, "%s", row);
        cr_assert_not_null(strstr(row, want), "%s in the epoch row: %s", want, row);
        cr_assert_eq(cli_run(PLOT, cli_path(dir, "m.csv"), out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "(train loss, test loss, test MSE and MAE, output 1's "
                                       "test accuracy)"), "%s", out);
        f = fopen(cli_path(dir, "bad.csv"), "w"); /* a column no run writes: refused */
        cr_assert_not_null(f);
        fputs("step,epoch,train_loss,lr,samples_per_s,test_loss,test_acc,test_acc_1,val_acc_2\n"
              "1,1,0.5,0.1,10,,,,\n", f);
        fclose(f);
        cr_assert_eq(cli_run(PLOT, cli_path(dir, "bad.csv"), out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "not a strata-train metrics CSV"), "%s", out);
        cli_rmtree(dir);
}

/* Set the application block's length of checkpoint @p path to @p bytes (its header's CRC). */
static void app_bytes(const char *path, uint32_t bytes)
{
        struct strata__ckpt_header hd;
        FILE *f = fopen(path, "r+b");

        cr_assert_not_null(f, "%s", path);
        cr_assert_eq(fread(&hd, sizeof(hd), 1, f), 1);
        hd.app_bytes = bytes;
        hd.crc = strata__crc32_header(&hd);
        rewind(f);
        cr_assert_eq(fwrite(&hd, sizeof(hd), 1, f), 1);
        fclose(f);
}

/*
 * A finished run of a CE output beside an MSE output, resumed, prints the accuracy it ended
 * with (JSON's 17 digits, the text line's); a block of the layout before the accuracies (208
 * bytes) still loads and prints them unknown; a block of a length no strata-train wrote is
 * refused by name, the checkpoint left as it was.
 */
Test(multi_io_cli, per_output_accuracy_resumes, .timeout = 120)
{
        char dir[256], args[1024], accs[256], again[256], ckpt[300];
        struct stat st;
        off_t size;

        cli_mkdtemp(dir, sizeof(dir), "mioaccres");
        snprintf(args, sizeof(args), CE_JSON " --ckpt-dir %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        json_array("\"test_accs\":[", accs, sizeof(accs));
        cr_assert_null(strstr(accs, "[null,null]"), "%s", accs);
        snprintf(args, sizeof(args), CE_JSON " --resume %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "\"finished\":true"), "%s", out);
        json_array("\"test_accs\":[", again, sizeof(again));
        cr_assert_str_eq(again, accs, "resumed: %s", out);
        cr_assert_null(strstr(out, "was trained with"), "the same output losses: %s", out);
        snprintf(args, sizeof(args), "--synthetic-regression 512 --batch 32 --epochs 2 "
                 "--invariant --lr 0.2 --bind none --model " CE_LINE " --resume %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        snprintf(again, sizeof(again), "test_accs -,%.4f", strtod(accs + 18, NULL));
        cr_assert_not_null(strstr(out, again), "%s: %s", again, out);

        snprintf(ckpt, sizeof(ckpt), "%s", cli_path(dir, "epoch-2.ckpt"));
        app_bytes(ckpt, 208); /* the block as strata-train wrote it before */
        snprintf(args, sizeof(args), CE_JSON " --resume %s", dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        json_array("\"test_accs\":[", again, sizeof(again));
        cr_assert_str_eq(again, "\"test_accs\":[null,null]", "an older block: %s", out);
        json_array("\"test_losses\":[", again, sizeof(again));
        cr_assert_null(strstr(again, "null"), "its losses stay known: %s", out);

        app_bytes(ckpt, 212);
        cr_assert_eq(stat(ckpt, &st), 0);
        size = st.st_size;
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "holds a strata-train block of 212 bytes, a layout this "
                                       "strata-train does not read"), "%s", out);
        cr_assert_null(strstr(out, "\"final\""), "%s", out);
        cr_assert_eq(stat(ckpt, &st), 0, "the checkpoint is kept");
        cr_assert_eq(st.st_size, size);
        app_bytes(ckpt, 248); /* the block again: the file lost nothing */
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        json_array("\"test_accs\":[", again, sizeof(again));
        cr_assert_str_eq(again, accs, "%s", out);
        cli_rmtree(dir);
}
