/*
 * A job of more than 64 processes is planned, not refused (issue 46; decision 0037: the cap
 * was 64, STRATA_MAX_PROCESSES): under a launcher's variables for 128 and 16 384 processes,
 * strata-train's --plan (nothing started) accepts the job and plans each process; past the
 * cap (65 536) it is refused, naming the bound. The 128-process run itself is
 * tools/many-procs.sh (minutes on 2 cores, not in the suite).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN "--synthetic 32768 --model 784-16-10 --batch 16384 --devices 1 --plan --json 2>&1"

static char out[1 << 15];

Test(many_processes_plan, past_64_processes_planned)
{
        static const int procs[] = { 65, 128, 16384 };

        for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
                char cmd[512], want[64];

                snprintf(cmd, sizeof(cmd), "env OMPI_COMM_WORLD_SIZE=%d OMPI_COMM_WORLD_RANK=0 "
                         BIN " " RUN, procs[i]);
                cr_assert_eq(cli_sh(cmd, out, sizeof(out)), 0, "%d processes: %s", procs[i],
                             out);
                snprintf(want, sizeof(want), "\"strategy\":\"mpi\",\"processes\":%d,", procs[i]);
                cr_assert_not_null(strstr(out, want), "%d processes: %s", procs[i], out);
        }
}

Test(many_processes_plan, past_the_bound_refused)
{
        cr_assert_eq(cli_sh("env OMPI_COMM_WORLD_SIZE=65537 OMPI_COMM_WORLD_RANK=0 " BIN " " RUN,
                            out, sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "65537 processes not in [1, 65536]"), "%s", out);
}
