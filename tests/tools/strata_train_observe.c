/*
 * strata-train's observability: the metrics CSV (columns, rows, write errors), the trace
 * option, tools/strata-plot's PNG, and the progress bar on a terminal (plain lines otherwise,
 * nothing with --quiet).
 */
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define PLOT STRATA_SOURCE_DIR "/tools/strata-plot"
#define RUN "--synthetic 2048 --epochs 2 --batch 64 --strategy ddp --devices 2 --model 784-32-10 "

static char dir[64];
static char out[1 << 16];

static void make_dir(void)
{
        cli_mkdtemp(dir, sizeof(dir), "observe");
}

static void remove_dir(void)
{
        cli_rmtree(dir);
}

/* 2 epochs of 32 batches, a row every 10: rows 10, 20, 30 and an epoch row, twice. */
Test(metrics_csv, documented_columns_one_row_per_logging_step_and_epoch)
{
        char args[512], path[96], line[256];
        long expect_step[] = { 10, 20, 30, 32, 42, 52, 62, 64 };
        int rows = 0, epochs = 0;
        FILE *f;

        make_dir();
        snprintf(path, sizeof(path), "%s/m.csv", dir);
        snprintf(args, sizeof(args), RUN "--metrics-csv %s --log-every 10 --quiet", path);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        f = fopen(path, "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof(line), f));
        cr_assert_str_eq(line, "step,epoch,train_loss,lr,samples_per_s,test_loss,test_acc\n");
        while (fgets(line, sizeof(line), f)) {
                long step;
                int epoch, n;
                double loss, lr, sps, tloss = -1.0, acc = -1.0;

                n = sscanf(line, "%ld,%d,%lf,%lf,%lf,%lf,%lf", &step, &epoch, &loss, &lr, &sps,
                           &tloss, &acc);
                cr_assert(n == 5 || n == 7, "row %d: %s", rows, line);
                cr_assert_lt(rows, 8, "too many rows: %s", line);
                cr_assert_eq(step, expect_step[rows], "row %d: %s", rows, line);
                cr_assert_eq(epoch, step <= 32 ? 1 : 2, "%s", line);
                cr_assert(loss > 0.0 && loss < 10.0, "%s", line);
                cr_assert_float_eq(lr, 0.05, 1e-9, "%s", line);
                cr_assert_gt(sps, 0.0, "%s", line);
                if (n == 7) {
                        epochs++;
                        cr_assert(step % 32 == 0, "test_acc only on epoch rows: %s", line);
                        cr_assert(acc >= 0.0 && acc <= 1.0, "%s", line);
                        cr_assert(tloss > 0.0 && tloss < 10.0, "%s", line);
                }
                rows++;
        }
        fclose(f);
        cr_assert_eq(rows, 8);
        cr_assert_eq(epochs, 2);
        remove_dir();
}

Test(metrics_csv, write_errors_and_bad_paths_are_reported)
{
        cr_assert_eq(cli_run(BIN, RUN "--metrics-csv /dev/full", out, sizeof(out)), 2, "%s",
                     out);
        cr_assert_not_null(strstr(out, "--metrics-csv /dev/full: write failed"), "%s", out);
        cr_assert_null(strstr(out, "epoch "), "nothing may run: %s", out);
        cr_assert_eq(cli_run(BIN, RUN "--metrics-csv /nonexistent-dir/m.csv", out, sizeof(out)),
                     2, "%s", out);
        cr_assert_not_null(strstr(out, "/nonexistent-dir/m.csv"), "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--log-every 0", out, sizeof(out)), 2, "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--trace-events 3", out, sizeof(out)), 2, "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--stall-report -1", out, sizeof(out)), 2, "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--timeout 0", out, sizeof(out)), 2, "%s", out);
}

Test(trace_cli, trace_option_writes_a_valid_timeline)
{
        char args[512], path[96], cmd[512];

        make_dir();
        snprintf(path, sizeof(path), "%s/t.json", dir);
        snprintf(args, sizeof(args), RUN "--trace %s", path);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "trace: "), "%s", out);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/check_trace.py %s 2 "
                                   "train_step 'gradient bucket' 'forward linear' >&2",
                 STRATA_SOURCE_DIR, path);
        cr_assert_eq(system(cmd), 0);
        cr_assert_eq(cli_run(BIN, RUN "--trace /nonexistent-dir/t.json", out, sizeof(out)), 2,
                     "%s", out);
        cr_assert_not_null(strstr(out, "'/nonexistent-dir' for '/nonexistent-dir/t.json'"), "%s",
                           out);
        remove_dir();
}

Test(strata_plot, draws_a_png_and_refuses_bad_input)
{
        char args[512], csv[96], png[96], bad[96];
        unsigned char magic[8] = { 0 };
        FILE *f;

        make_dir();
        snprintf(csv, sizeof(csv), "%s/m.csv", dir);
        snprintf(png, sizeof(png), "%s/m.png", dir);
        snprintf(args, sizeof(args), RUN "--metrics-csv %s --log-every 8 --quiet", csv);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(cli_run(PLOT, csv, out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "wrote "), "%s", out);
        cr_assert_not_null(strstr(out, png), "%s", out);
        f = fopen(png, "rb");
        cr_assert_not_null(f, "no %s", png);
        cr_assert_eq(fread(magic, 1, 8, f), 8);
        fclose(f);
        cr_assert_eq(memcmp(magic, "\x89PNG\r\n\x1a\n", 8), 0, "not a PNG");
        cr_assert_eq(cli_run(PLOT, "/nonexistent.csv", out, sizeof(out)), 2, "%s", out);
        snprintf(bad, sizeof(bad), "%s/bad.csv", dir);
        f = fopen(bad, "w");
        fputs("a,b\n1,2\n", f);
        fclose(f);
        cr_assert_eq(cli_run(PLOT, bad, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "not a strata-train metrics CSV"), "%s", out);
        f = fopen(bad, "w");
        fputs("step,epoch,train_loss,lr,samples_per_s,test_acc\n1,x,0.5,0.1,10,\n", f);
        fclose(f);
        cr_assert_eq(cli_run(PLOT, bad, out, sizeof(out)), 2, "%s", out);
        remove_dir();
}

/*
 * OUT is replaced as every output file: a symlink's target replaced (the link kept), a device
 * or FIFO refused and left as it was, no temporary file left behind.
 */
Test(strata_plot, output_links_followed_devices_refused)
{
        char args[512], csv[96], link[96], target[96], cmd[512];
        struct stat st;

        make_dir();
        snprintf(csv, sizeof(csv), "%s/m.csv", dir);
        snprintf(link, sizeof(link), "%s/link.png", dir);
        snprintf(target, sizeof(target), "%s/target.png", dir);
        snprintf(args, sizeof(args), RUN "--metrics-csv %s --log-every 8 --quiet", csv);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(symlink("target.png", link), 0);
        snprintf(args, sizeof(args), "%s %s", csv, link);
        cr_assert_eq(cli_run(PLOT, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(lstat(link, &st), 0);
        cr_assert(S_ISLNK(st.st_mode), "the link was replaced");
        cr_assert_eq(stat(target, &st), 0);
        cr_assert(S_ISREG(st.st_mode) && st.st_size > 8, "the link's target was not written");
        snprintf(args, sizeof(args), "%s /dev/null", csv);
        cr_assert_eq(cli_run(PLOT, args, out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "not a regular file"), "%s", out);
        cr_assert_eq(stat("/dev/null", &st), 0);
        cr_assert(S_ISCHR(st.st_mode), "/dev/null is no longer a device");
        snprintf(cmd, sizeof(cmd), "mkfifo %s/fifo.png", dir);
        cr_assert_eq(system(cmd), 0);
        snprintf(args, sizeof(args), "%s %s/fifo.png", csv, dir);
        cr_assert_eq(cli_run(PLOT, args, out, sizeof(out)), 2, "%s", out);
        snprintf(cmd, sizeof(cmd), "test -p %s/fifo.png && ! ls -A %s | grep -q tmp", dir, dir);
        cr_assert_eq(system(cmd), 0, "the FIFO was replaced or a temporary file was left");
        remove_dir();
}

/* A terminal gets a bar rewritten in place; a pipe gets plain epoch lines; --quiet nothing. */
Test(progress, bar_on_a_terminal_lines_otherwise_nothing_when_quiet)
{
        cr_assert_eq(cli_run_tty(BIN, RUN "--synthetic 20000 --epochs 1", out, sizeof(out)), 0,
                     "%s", out);
        cr_assert_not_null(strstr(out, "\repoch 1/1 ["), "%s", out);
        cr_assert_not_null(strstr(out, "samples/s  ETA "), "%s", out);
        cr_assert_not_null(strstr(out, "s (run "), "the whole run's ETA too: %s", out);
        cr_assert_not_null(strstr(out, "\r\033[K"), "the bar is cleared: %s", out);
        cr_assert_not_null(strstr(out, "epoch   1  train_loss"), "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--epochs 1", out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strchr(out, '\r'), "no bar on a pipe: %s", out);
        cr_assert_not_null(strstr(out, "epoch   1  train_loss"), "%s", out);
        cr_assert_eq(cli_run_tty(BIN, RUN "--epochs 1 --quiet", out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "epoch 1/1"), "%s", out);
        cr_assert_null(strstr(out, "epoch   1"), "%s", out);
        cr_assert_null(strstr(out, "final:"), "--quiet prints nothing but --json's: %s", out);
}
