/*
 * The shm link of an MPI job on one host (decision 0105): chosen when every process shares
 * this host, bitwise the MPI link's parameters (2 and 3 processes, ddp, zero1 and invariant
 * mode), STRATA_MPI_LINK=mpi and --mpi-allreduce honoured, a process that does not want it
 * keeping every process on the MPI link (whichever rank it is), processes on hosts apart
 * (tools/hosts-apart.sh) kept on it, a bad value refused by every process (on one process
 * too; no MPI_Abort), a process that refused the job before the region's set-up named, nothing
 * left in /dev/shm. The
 * faults (a killed, hung or stopped rank named within the timeout) are in processes.c and
 * process_stopped.c, over both links.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none " SAN_QUIET
#define ARGS "--devices 1 --synthetic 2048 --epochs 1 --batch 128 --limit-val-batches 0 " \
             "--seed 424250 "

static char out[1 << 16];

static void need_mpi(void)
{
        if (!cli_have_mpi())
                cr_skip_test("mpirun or libstrata-mpi.so missing");
        cli_serial_jobs();
}

/* Run @p cmd (stderr folded in); it must exit 0. */
static void run(const char *cmd)
{
        char line[2048];
        int rc;

        snprintf(line, sizeof(line), "%s 2>&1", cmd);
        rc = cli_sh(line, out, sizeof(out));
        cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
}

/* Every one of @p np processes said it joined over link @p link. */
static void joined_over(int np, const char *link)
{
        char want[128];

        for (int p = 0; p < np; p++) {
                snprintf(want, sizeof(want), "process %d of %d joined over the %s link", p, np,
                         link);
                cr_assert(strstr(out, want), "no '%s' in:\n%s", want, out);
        }
}

Test(mpi_shm_link, chosen_on_one_host, .timeout = 300)
{
        need_mpi();
        run(MPIRUN "-np 2 " BIN " " ARGS "--verbose");
        joined_over(2, "shm");
        run(MPIRUN "-np 3 " BIN " " ARGS "--strategy zero1 --verbose");
        joined_over(3, "shm");
        run(MPIRUN "-np 2 -x STRATA_MPI_LINK=mpi " BIN " " ARGS "--verbose");
        joined_over(2, "mpi");
        run(MPIRUN "-np 2 -x STRATA_MPI_LINK=shm " BIN " " ARGS "--verbose");
        joined_over(2, "shm");
        /* MPI's own reductions need the MPI link */
        run(MPIRUN "-np 2 " BIN " " ARGS "--mpi-allreduce --verbose");
        joined_over(2, "mpi");
}

/* Exported weights of @p extra under @p np processes: the same over both links. */
static void both_links(const char *dir, int np, const char *extra, const char *tag)
{
        char cmd[1024], a[64], b[64];

        snprintf(a, sizeof(a), "%s-shm", tag);
        snprintf(b, sizeof(b), "%s-mpi", tag);
        snprintf(cmd, sizeof(cmd), MPIRUN "-np %d " BIN " " ARGS "%s --verbose "
                 "--export-safetensors %s", np, extra, cli_path(dir, a));
        run(cmd);
        joined_over(np, "shm");
        snprintf(cmd, sizeof(cmd), MPIRUN "-np %d -x STRATA_MPI_LINK=mpi " BIN " " ARGS
                 "%s --export-safetensors %s", np, extra, cli_path(dir, b));
        run(cmd);
        cli_same_files(dir, a, b);
}

Test(mpi_shm_link, bitwise_equal_mpi_link, .timeout = 600)
{
        char dir[256];

        need_mpi();
        cli_mkdtemp(dir, sizeof(dir), "shmlink");
        both_links(dir, 2, "", "ddp2");
        both_links(dir, 3, "", "ddp3");
        both_links(dir, 3, "--strategy zero1", "zero3");
        both_links(dir, 3, "--invariant", "inv3");
        cli_rmtree(dir);
}

/*
 * A process that asks for the MPI link (rank 0: the one that makes the region; or rank 1)
 * keeps every process on it, with the same weights as the shm link's.
 */
Test(mpi_shm_link, one_process_keeps_all_on_mpi, .timeout = 300)
{
        char dir[256], cmd[1024];

        need_mpi();
        cli_mkdtemp(dir, sizeof(dir), "shmlink");
        snprintf(cmd, sizeof(cmd), MPIRUN "-np 2 " BIN " " ARGS "--export-safetensors %s",
                 cli_path(dir, "shm"));
        run(cmd);
        /* Open MPI's -x options hold for the first context only: each context has its own */
        snprintf(cmd, sizeof(cmd), MPIRUN "-np 1 env STRATA_MPI_LINK=mpi " BIN " " ARGS
                 "--verbose --export-safetensors %s : " SAN_QUIET "-np 1 " BIN " " ARGS
                 "--verbose", cli_path(dir, "first"));
        run(cmd);
        joined_over(2, "mpi");
        cli_same_files(dir, "shm", "first");
        snprintf(cmd, sizeof(cmd), MPIRUN "-np 1 " BIN " " ARGS "--verbose --export-safetensors "
                 "%s : " SAN_QUIET "-np 1 env STRATA_MPI_LINK=mpi " BIN " " ARGS "--verbose",
                 cli_path(dir, "second"));
        run(cmd);
        joined_over(2, "mpi");
        cli_same_files(dir, "shm", "second");
        cli_rmtree(dir);
}

/* Hosts apart (network namespaces, one process each: Open MPI sees two nodes): the MPI link. */
Test(mpi_shm_link, hosts_apart_keep_mpi, .timeout = 900)
{
        int rc;

        need_mpi();
        rc = cli_sh("HOSTS_LIMIT=300 " STRATA_SOURCE_DIR "/tools/hosts-apart.sh -m -- -np 2 "
                    SAN_QUIET BIN " " ARGS "--bind none --verbose 2>&1", out, sizeof(out));
        if (rc == 77)
                cr_skip_test("%s", out);
        cr_assert_eq(rc, 0, "exit %d\n%s", rc, out);
        joined_over(2, "mpi");
}

/* Whether @p needle is in @p hay at least @p times. */
static int seen_times(const char *hay, const char *needle, int times)
{
        for (const char *p = hay; times > 0; p += strlen(needle), times--)
                if (!(p = strstr(p, needle)))
                        return 0;
        return 1;
}

/* STRATA_MPI_LINK=bogus on process @p bad alone: every process refuses, naming it; no abort. */
static void refused_on_one(int bad)
{
        char cmd[1024], said[128];
        int rc;

        snprintf(cmd, sizeof(cmd), MPIRUN "-np 1 %s" BIN " " ARGS "--verbose : " SAN_QUIET
                 "-np 1 %s" BIN " " ARGS "--verbose 2>&1", bad ? "" : "env STRATA_MPI_LINK=bogus ",
                 bad ? "env STRATA_MPI_LINK=bogus " : "");
        rc = cli_sh(cmd, out, sizeof(out));
        cr_assert_neq(rc, 0, "STRATA_MPI_LINK=bogus on rank %d exited 0:\n%s", bad, out);
        snprintf(said, sizeof(said), "STRATA_MPI_LINK=bogus: auto, shm or mpi (process %d;", bad);
        cr_assert(strstr(out, said), "%s", out);
        snprintf(said, sizeof(said), "process %d's STRATA_MPI_LINK is not auto, shm or mpi", bad);
        cr_assert(strstr(out, said), "%s", out);
        cr_assert_null(strstr(out, "joined over"), "%s", out);
        cr_assert_null(strstr(out, "MPI_Abort"), "the job was aborted:\n%s", out);
        cr_assert_null(strstr(out, "MPI_ABORT"), "the job was aborted:\n%s", out);
        cr_assert(seen_times(out, "every process refuses the job", 2), "%s", out);
}

/* Issue 58, item 4: a bad value, on every process or on one, is refused by every process with
 * a status (each says so), and nothing calls MPI_Abort. */
Test(mpi_shm_link, bad_value_refused, .timeout = 300)
{
        int rc;

        need_mpi();
        rc = cli_sh(MPIRUN "-np 2 -x STRATA_MPI_LINK=bogus " BIN " " ARGS "--verbose 2>&1", out,
                    sizeof(out));
        cr_assert_neq(rc, 0, "STRATA_MPI_LINK=bogus exited 0:\n%s", out);
        cr_assert(strstr(out, "STRATA_MPI_LINK=bogus: auto, shm or mpi (process 0;"), "%s", out);
        cr_assert(strstr(out, "STRATA_MPI_LINK=bogus: auto, shm or mpi (process 1;"), "%s", out);
        cr_assert_null(strstr(out, "joined over"), "%s", out);
        cr_assert_null(strstr(out, "MPI_Abort"), "the job was aborted:\n%s", out);
        cr_assert_null(strstr(out, "MPI_ABORT"), "the job was aborted:\n%s", out);
        /* on one process only (either rank): every process refuses, naming it */
        refused_on_one(0);
        refused_on_one(1);
}

/* A process that refused the job before the region's set-up: the others end within the timeout
 * (tests/build/mpi_shm_refused.sh). */
Test(mpi_shm_link, refused_before_share_named, .timeout = 120)
{
        need_mpi();
        cr_assert_eq(cli_build_script("mpi_shm_refused.sh"), 0,
                     "a process waited for one that refused the job (see output)");
}

/* Whether every line of @p after is in @p before. */
static int nothing_new(const char *before, const char *after)
{
        char line[256];

        for (const char *p = after; *p;) {
                size_t n = strcspn(p, "\n");

                snprintf(line, sizeof(line), "%.*s", (int)n, p);
                if (n && !strstr(before, line))
                        return 0;
                p += n + (p[n] == '\n');
        }
        return 1;
}

/* The region is an unnamed memory file: nothing of the job's is left in /dev/shm. */
Test(mpi_shm_link, nothing_left, .timeout = 300)
{
        char before[4096], after[4096];

        need_mpi();
        cli_sh("ls /dev/shm | sort", before, sizeof(before));
        run(MPIRUN "-np 2 " BIN " " ARGS "--verbose");
        joined_over(2, "shm");
        for (int i = 0; i < 30; i++) { /* mpirun removes its own segments as it finishes */
                cli_sh("ls /dev/shm | sort", after, sizeof(after));
                if (nothing_new(before, after))
                        break;
                usleep(100000);
        }
        cr_assert(nothing_new(before, after), "/dev/shm before:\n%s\nafter:\n%s", before,
                  after);
}
