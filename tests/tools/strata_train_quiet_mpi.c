/*
 * strata-train's output options reach what they promise: --quiet prints nothing on stdout but
 * what --json asks for (errors and warnings stay on stderr); --mpi-allreduce reaches the
 * runtime's configuration (cfg.process.mpi_allreduce) and is refused outside --strategy mpi.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define RUN BIN " --synthetic 1024 --epochs 2 --batch 64 --model 784-16-10 "

static char out[1 << 15];

Test(quiet, nothing_on_stdout_without_json)
{
        cr_assert_eq(cli_sh(RUN "--quiet 2>/dev/null", out, sizeof(out)), 0, "%s", out);
        cr_assert_str_eq(out, "", "--quiet printed: %s", out);
        cr_assert_eq(cli_sh(RUN "--quiet --metrics-csv /dev/null --trace /tmp/strata-quiet-"
                                "trace.json 2>/dev/null; rm -f /tmp/strata-quiet-trace.json",
                            out, sizeof(out)), 0, "%s", out);
        cr_assert_str_eq(out, "", "--quiet printed: %s", out);
}

Test(quiet, only_json_with_json)
{
        char *line, *save;
        int n = 0;

        cr_assert_eq(cli_sh(RUN "--quiet --json 2>/dev/null", out, sizeof(out)), 0, "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++)
                cr_assert_eq(line[0], '{', "not JSON: %s", line);
        cr_assert_eq(n, 3, "two epochs and the final object");
}

/* Errors still reach stderr under --quiet. */
Test(quiet, errors_stay_on_stderr)
{
        cr_assert_eq(cli_sh(RUN "--quiet --lr-schedule bogus 2>&1 >/dev/null", out, sizeof(out)),
                     2, "%s", out);
        cr_assert_not_null(strstr(out, "--lr-schedule"), "%s", out);
}

Test(mpi_allreduce, refused_outside_mpi)
{
        cr_assert_eq(cli_sh(RUN "--strategy ddp --devices 2 --mpi-allreduce 2>&1", out,
                            sizeof(out)), 2, "%s", out);
        cr_assert_not_null(strstr(out, "--mpi-allreduce"), "%s", out);
        cr_assert_not_null(strstr(out, "--strategy mpi"), "%s", out);
}

/* The option reaches the configuration every rank runs with (it used to be dropped). */
Test(mpi_allreduce, reaches_the_configuration, .timeout = 120)
{
        if (!cli_have_mpi())
                cr_skip("no Open MPI here");
        cr_assert_eq(cli_sh(CLI_MPIRUN_2 RUN "--epochs 1 --strategy mpi --devices 1 "
                            "--mpi-allreduce --verbose --quiet 2>&1", out, sizeof(out)), 0,
                     "%s", out);
        cr_assert_not_null(strstr(out, "gradients summed by MPI_Allreduce"), "%s", out);
        cr_assert_eq(cli_sh(CLI_MPIRUN_2 RUN "--epochs 1 --strategy mpi --devices 1 --verbose "
                            "--quiet 2>&1", out, sizeof(out)), 0, "%s", out);
        cr_assert_null(strstr(out, "MPI_Allreduce"), "%s", out);
}
