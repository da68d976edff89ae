/*
 * strata-bench-scale, the alpha-beta model of the collectives (issue 46, item 3; decision
 * 0037): its MPI message counts are those strata-bench-sched measured here (rank 0, one device
 * per process, 2 to 16 processes, every schedule: direct, butterfly with and without pairs,
 * small, split and rounds; all_reduce, broadcast, all_gather); the modeled all_reduce at 1 024
 * and 16 384 processes is within 2x of the alpha-beta lower bound for 8 B, 1 MiB and 64 MiB on
 * the links measured here; bad arguments are refused with exit 2 and the reason.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-bench-scale"
#define LINK "--alpha 27e-6 --beta 1.07e-9 --gamma 2.6e-10 " /* TCP between namespaces */

static char out[1 << 14];

/* procs, op, bytes, messages: strata-bench-sched's counts (tools/bench-scale.sh's runs). */
static const struct {
        int procs;
        const char *op;
        long bytes, msgs;
} measured[] = {
        { 2, "all_reduce", 8, 1 },         { 2, "all_reduce", 65536, 4 },
        { 2, "all_reduce", 1048576, 4 },   { 4, "all_reduce", 4096, 3 },
        { 4, "all_reduce", 65536, 12 },    { 4, "all_reduce", 1048576, 12 },
        { 5, "all_reduce", 8, 4 },         { 5, "all_reduce", 65536, 15 },
        { 5, "all_reduce", 3145728, 37 },  { 6, "all_reduce", 1048576, 15 },
        { 8, "all_reduce", 8, 3 },         { 8, "all_reduce", 1048576, 15 },
        { 12, "all_reduce", 8, 5 },        { 12, "all_reduce", 3145728, 50 },
        { 16, "all_reduce", 8, 4 },        { 16, "all_reduce", 65536, 18 },
        { 16, "all_reduce", 1048576, 20 }, { 2, "broadcast", 1048576, 2 },
        { 4, "broadcast", 65536, 6 },      { 5, "broadcast", 8, 7 },
        { 5, "broadcast", 1048576, 10 },   { 8, "broadcast", 1048576, 9 },
        { 4, "all_gather", 8, 3 },         { 5, "all_gather", 4096, 8 },
        { 5, "all_gather", 1048576, 37 },  { 8, "all_gather", 4096, 8 },
        { 8, "all_gather", 1048576, 51 },
};

Test(strata_bench_scale_cli, message_counts_are_the_measured_ones)
{
        for (size_t i = 0; i < sizeof(measured) / sizeof(measured[0]); i++) {
                char args[256];
                long p, b, steps, msgs;

                snprintf(args, sizeof(args), LINK "--counts %d --op %s %ld", measured[i].procs,
                         measured[i].op, measured[i].bytes);
                cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s: %s", args, out);
                cr_assert_eq(sscanf(out, "%ld %ld %ld %ld", &p, &b, &steps, &msgs), 4, "%s",
                             out);
                cr_assert_eq(msgs, measured[i].msgs, "%d processes, %s of %ld B: %ld messages "
                             "modeled, %ld measured", measured[i].procs, measured[i].op,
                             measured[i].bytes, msgs, measured[i].msgs);
        }
}

/*
 * A training step's MPI messages (rank 0, default model, one device per process), as
 * tools/bench-sharded-procs.sh measured them with strata-train (strata-count-isend.so, a
 * 20-step epoch less a 10-step one, over 10): zero2 and fsdp with one collective per layer
 * (decision 0045) and, before it, one per shard piece.
 */
Test(strata_bench_scale_cli, training_step_counts_are_the_measured_ones)
{
        static const struct {
                int procs;
                long zero2, fsdp, zero2_pieces, fsdp_pieces;
        } step[] = { { 8, 57, 84, 153, 235 }, { 16, 66, 102, 300, 499 } };

        cr_assert_eq(cli_run(BIN, LINK "--max-procs 16", out, sizeof(out)), 0, "%s", out);
        for (size_t i = 0; i < sizeof(step) / sizeof(step[0]); i++) {
                char key[64];
                const char *l;
                long p, m[5];

                snprintf(key, sizeof(key), "\n%-17s %7d ", "784-256-128-10", step[i].procs);
                cr_assert_not_null(l = strstr(out, key), "no row for %d processes: %s",
                                   step[i].procs, out);
                cr_assert_eq(sscanf(l, " %*s %ld %*f %*d %ld %*f %*d %ld %*f %*d %ld %*f %*d %ld "
                                    "%*f %*d %ld", &p, &m[0], &m[1], &m[2], &m[3], &m[4]), 6,
                             "%s", l);
                cr_assert_eq(m[1], step[i].zero2, "%d processes: zero2 %ld", step[i].procs, m[1]);
                cr_assert_eq(m[2], step[i].fsdp, "%d processes: fsdp %ld", step[i].procs, m[2]);
                cr_assert_eq(m[3], step[i].zero2_pieces, "%d processes: zero2 per piece %ld",
                             step[i].procs, m[3]);
                cr_assert_eq(m[4], step[i].fsdp_pieces, "%d processes: fsdp per piece %ld",
                             step[i].procs, m[4]);
        }
}

/* Each of the six rows (1 024 and 16 384 processes x 8 B, 1 MiB, 64 MiB) says yes. */
static void within_2x(const char *link)
{
        char args[256];
        int rows = 0;

        snprintf(args, sizeof(args), "%s--max-procs 16384", link);
        cr_assert_eq(cli_run(BIN, args, out, sizeof(out)), 0, "%s", out);
        for (const char *l = strstr(out, "\n   1024 "); l && rows < 6; l = strchr(l + 1, '\n')) {
                long p;
                double bytes, model, bound, ratio;
                char yes[8];

                if (sscanf(l, "%ld %lf %lf %lf %lf %*d %*d %7s", &p, &bytes, &model, &bound,
                           &ratio, yes) != 6)
                        break;
                cr_assert(p == 1024 || p == 16384, "%s", l);
                cr_assert(ratio > 0.0 && ratio <= 2.0 && !strcmp(yes, "yes"),
                          "%ld processes, %.0f B: %.2fx the bound (%s)", p, bytes, ratio, link);
                cr_assert_leq(model, 2.0 * bound * 1.0001, "%s", l);
                rows++;
        }
        cr_assert_eq(rows, 6, "six rows: %s", out);
}

Test(strata_bench_scale_cli, allreduce_within_2x_of_the_bound_at_scale)
{
        within_2x(LINK);
        within_2x("--alpha 0.22e-6 --beta 1.5e-9 --gamma 2.6e-10 "); /* shared memory */
}

Test(strata_bench_scale_cli, bad_arguments_refused)
{
        static const char *const bad[] = {
                "",                                    /* no link */
                "--alpha 1e-6",                        /* no beta */
                "--alpha x --beta 1e-9",               /* not a number */
                "--alpha -1 --beta 1e-9",              /* not positive */
                "--alpha 1e-6 --beta 0",               /* zero */
                "--alpha 1e-6 --beta inf",             /* not finite */
                "--alpha 1e-6 --beta 1e-9 --counts 1 8", /* one process */
                "--alpha 1e-6 --beta 1e-9 --counts 4",   /* no sizes */
                "--alpha 1e-6 --beta 1e-9 --counts 4 x", /* a bad size */
                "--alpha 1e-6 --beta 1e-9 --counts 4 --op scatter 8", /* not modeled */
                "--alpha 1e-6 --beta 1e-9 --max-procs 1",
                "--alpha 1e-6 --beta 1e-9 8",          /* sizes without --counts */
                "--bogus",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(cli_run(BIN, bad[i], out, sizeof(out)), 2, "'%s': %s", bad[i], out);
                cr_assert(strstr(out, "usage:") || strstr(out, "is not a positive number"),
                          "'%s' says why: %s", bad[i], out);
        }
        cr_assert_eq(cli_run(BIN, "--alpha 1e-6 --beta 1e-9 --gamma 1e-10 --dir /nonexistent/d",
                             out, sizeof(out)), 1, "%s", out);
        cr_assert_not_null(strstr(out, "cannot write in /nonexistent/d"), "%s", out);
}
