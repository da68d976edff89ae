/*
 * How strata-train starts its processes: --strategy spawn's parent (and --processes N's) forks
 * them, each running the tool's entry again with its rank and one device; under mpi the
 * launcher started them, and says which one this is. Every process ends job_setup() knowing
 * its rank in the job (struct run's rank).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>

#include "tools/train/train.h"

/* What a spawned process runs: the tool's entry, with the parent's command line. */
struct child {
        int argc;
        char **argv;
        int (*entry)(int argc, char **argv, int rank);
};

/* 128 + a stop signal: the run stopped as asked (checkpoint.c's stop()). */
static int stop_status(int rc)
{
        return rc == 128 + SIGINT || rc == 128 + SIGTERM || rc == 128 + SIGUSR1;
}

/*
 * A spawned process: its run. A run stopped by a signal (every process at the same step)
 * exits 0, so the parent does not abort the others while they save, and rank 0 hands the
 * parent its exit status instead.
 */
static int spawn_child(int rank, int size, void *arg)
{
        const struct child *c = arg;
        int rc;

        (void)size;
        optind = 1; /* the command line is parsed again */
        rc = c->entry(c->argc, c->argv, rank);
        if (!stop_status(rc))
                return rc;
        strata_spawn_return(&rc, sizeof(rc));
        return 0;
}

/**
 * @brief --strategy spawn's parent: o->devices processes (zero1, zero2, fsdp: --processes),
 *        each running @p entry with its rank; the job's exit status, that of a single process:
 *        128 + the signal when a stop signal (forwarded by strata_spawn() when the parent gets
 *        it) stopped the job.
 */
int spawn_parent(int argc, char **argv, const struct opts *o,
                 int (*entry)(int argc, char **argv, int rank))
{
        struct child c = { argc, argv, entry };
        struct strata_spawn_result res;
        int n = o->processes > 1 ? o->processes : o->devices, status = 0;

        if (strata_spawn(n, spawn_child, &c, o->timeout_s, &status, sizeof(status), &res) ==
            STRATA_OK)
                return res.bytes == sizeof(status) ? status : 0;
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        if (res.failed_rank >= 0 && stop_status(res.status))
                return res.status; /* killed by the signal before it could stop */
        return res.failed_rank >= 0 ? 1 : 2;
}

/* This process's rank in its job: @p spawned (a spawned process's, else -1), the launcher's,
 * or 0. */
static int job_rank(int spawned)
{
        struct strata_launch l;

        if (spawned >= 0)
                return spawned;
        return strata_launch_detect(&l) == STRATA_OK ? l.rank : 0;
}

/**
 * @brief This process's place in its job: r->rank (on entry a spawned process's rank, else
 *        -1) becomes its rank in the job; a spawned one has one device; under mpi the launcher
 *        must be known (and one process a node is advised). 0, or 2.
 */
int job_setup(struct run *r)
{
        struct strata_launch l;

        if (r->rank >= 0 && r->o.strategy == STRATA_STRATEGY_SPAWN)
                r->o.devices = 1; /* each spawned process is one device */
        r->rank = job_rank(r->rank);
        if (r->o.strategy != STRATA_STRATEGY_MPI)
                return 0;
        if (strata_launch_detect(&l))
                return bad("%s", strata_last_error());
        if (l.local_size > 1 && r->o.devices == 1 && l.local_rank == 0)
                fprintf(stderr, "strata-train: %d processes of one device share this host: one "
                                "process per node with --devices %d is faster (its devices "
                                "share memory)\n",
                        l.local_size, l.local_size);
        return 0;
}
