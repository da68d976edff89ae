/*
 * strata-train --plan, --version and --help (issue 45, items 18 and 19): --plan prints the
 * memory plan (each device, the runtime's arena, the data's, the total, whether the machine
 * holds it) as text or JSON and exits 0 without training or touching anything, the runtime's
 * bytes those a run then plans and uses; --version the versions; --help an entry for each
 * option.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "strata/version.h"
#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 2048 --model 784-32-10 --batch 64 --strategy ddp --devices 2 "

static char out[1 << 15];

/* The number after "key": in @p s, which must hold it. */
static unsigned long long num(const char *s, const char *key)
{
        char k[64];
        const char *p;

        snprintf(k, sizeof(k), "\"%s\":", key);
        p = strstr(s, k);
        cr_assert_not_null(p, "no %s in %s", key, s);
        return strtoull(p + strlen(k), NULL, 10);
}

Test(plan, json_is_what_a_run_plans_and_uses, .timeout = 60)
{
        unsigned long long runtime, data, total;

        cr_assert_eq(cli_run(BIN, RUN "--epochs 1 --plan --json", out, sizeof(out)), 0, "%s",
                     out);
        cr_assert_null(strstr(out, "epoch"), "nothing trained: %s", out);
        cr_assert_not_null(strstr(out, "{\"plan\":true,\"strategy\":\"ddp\",\"processes\":1,"
                                       "\"devices\":2,"), "%s", out);
        cr_assert_not_null(strstr(out, "{\"device\":1,"), "each device: %s", out);
        cr_assert_not_null(strstr(out, "\"fits\":true"), "%s", out);
        runtime = num(out, "runtime_bytes");
        data = num(out, "data_bytes");
        total = num(out, "total_bytes");
        cr_assert_eq(total, runtime + data, "%s", out);
        cr_assert_eq(cli_run(BIN, RUN "--epochs 1 --json", out, sizeof(out)), 0, "%s", out);
        cr_assert_eq(num(out, "arena_bytes_planned"), runtime, "%s", out);
        cr_assert_eq(num(out, "arena_bytes_used"), runtime, "%s", out);
}

Test(plan, text_says_whether_it_fits_and_touches_nothing, .timeout = 60)
{
        char dir[64], args[512];
        struct stat st;

        cr_assert_eq(cli_run(BIN, RUN "--plan", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "memory plan of ddp, 2 device(s) a process"), "%s", out);
        cr_assert_not_null(strstr(out, "  device 1: "), "%s", out);
        cr_assert_not_null(strstr(out, "  runtime arena: "), "%s", out);
        cr_assert_not_null(strstr(out, "  data arena: "), "%s", out);
        cr_assert_not_null(strstr(out, ": it fits"), "%s", out);
        /* 90 billion parameters: no machine of this suite holds them */
        cr_assert_eq(cli_run(BIN, "--synthetic 2048 --model 784-300000-300000-10 --plan", out,
                             sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "it does NOT fit"), "%s", out);
        cli_mkdtemp(dir, sizeof(dir), "plan");
        snprintf(args, sizeof(args), RUN "--plan --ckpt-dir %s/c --metrics-csv %s/m.csv", dir,
                 dir);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        cr_assert_neq(stat(cli_path(dir, "c"), &st), 0, "--plan made the checkpoint directory");
        cr_assert_neq(stat(cli_path(dir, "m.csv"), &st), 0, "--plan wrote the metrics log");
        cli_rmtree(dir);
        cr_assert_eq(cli_run(BIN, "--synthetic 2048 --model 784-32-10 --strategy spawn "
                                  "--devices 2 --plan", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "spawn, 1 device(s) a process, 2 process(es)"), "%s",
                           out);
        cr_assert_null(strstr(strstr(out, "memory plan") + 1, "memory plan"), "once: %s", out);
}

Test(options, version_and_help_entries)
{
        static const char *const entries[] = { "  --processes P ", "  --chunks C ",
                                               "  --log-every N ", "  --version ",
                                               "  --plan ", "  --overwrite ",
                                               "zero1|zero2|fsdp|spawn|mpi" };

        cr_assert_eq(cli_run(BIN, "--version", out, sizeof(out)), 0, "%s", out);
        cr_assert_not_null(strstr(out, "strata-train " STRATA_VERSION_STRING " (libstrata "
                                       STRATA_VERSION_STRING ")"), "%s", out);
        cr_assert_eq(cli_run(BIN, "--help", out, sizeof(out)), 0, "%s", out);
        for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
                cr_assert_not_null(strstr(out, entries[i]), "no '%s' in --help", entries[i]);
}
