/*
 * How strata-train starts its processes: --strategy spawn's parent (and --processes N's) forks
 * them, each running the tool's entry again with its rank and one device; under mpi the
 * launcher started them, and says which one this is. Every process ends job_setup() knowing
 * its rank in the job (struct run's rank).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/train/train.h"

/* What a spawned process runs: the tool's entry, with the parent's command line. */
struct child {
        int argc;
        char **argv;
        int (*entry)(int argc, char **argv, int rank);
};

/* The processes of a job strata-train spawned (0: none). */
static int spawned_size;

/* 128 + a stop signal: the run stopped as asked (checkpoint.c's stop_run()). */
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

        spawned_size = size;
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
        if (res.failed_rank >= 0 && res.status == 2)
                return 2; /* a usage error, which the job's first process printed */
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        if (res.failed_rank >= 0 && stop_status(res.status))
                return res.status; /* killed by the signal before it could stop */
        return res.failed_rank >= 0 ? 1 : 2;
}

/* Strategies that span a launcher's processes themselves (their job: mpi, auto). */
static int spans_processes(const struct opts *o)
{
        return o->strategy == STRATA_STRATEGY_MPI ||
               ((o->strategy == STRATA_STRATEGY_ZERO1 || o->strategy == STRATA_STRATEGY_ZERO2 ||
                 o->strategy == STRATA_STRATEGY_FSDP) && o->processes <= 1);
}

/* Under a launcher, a refusal is said by the job's first process; the others wait a moment so
 * that the launcher sees the first fail first and shows its message. */
static int refuse(const struct strata_launch *l, const struct opts *o)
{
        if (l->rank > 0)
                bad_silent();
        bad("%s started %d processes, and --strategy %s%s trains within one process: each "
            "would run its own copy of the job. Use --strategy mpi (ddp over every process; "
            "zero1, zero2 and fsdp span them too), or start one process",
            l->launcher, l->size, strata_strategy_name(o->strategy),
            o->processes > 1 ? " --processes" : "");
        if (l->rank > 0)
                sleep(1);
        return 2;
}

/**
 * @brief Under a launcher that started several processes (Open MPI, Slurm, PMI, torchrun: the
 *        library's strata_launch_detect()), never N independent copies of the job: without
 *        --strategy they train as one job under mpi; a strategy that spans processes runs as
 *        asked; any other is refused. @p spawned: a process strata-train spawned (rank >= 0)
 *        has no launcher of its own. 0, or 2 after the message.
 */
int launcher_rule(struct opts *o, int spawned)
{
        struct strata_launch l;

        if (spawned >= 0)
                return 0;
        if (strata_launch_detect(&l))
                return bad("%s", strata_last_error());
        if (l.size <= 1 || spans_processes(o))
                return 0;
        if (o->strategy_set || o->processes > 1)
                return refuse(&l, o);
        o->strategy = STRATA_STRATEGY_MPI;
        if (l.rank == 0 && !o->quiet)
                fprintf(stderr, "strata-train: %s started %d processes: they train as one job "
                                "(--strategy mpi, %d device(s) each)\n",
                        l.launcher, l.size, o->devices);
        return 0;
}

/** @brief The processes of this job: those strata-train spawned, the launcher's, or 1. */
int job_size(void)
{
        struct strata_launch l;

        if (spawned_size)
                return spawned_size;
        return strata_launch_detect(&l) == STRATA_OK ? l.size : 1;
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
        if (r->rank > 0)
                bad_silent(); /* one voice per job: its first process's */
        r->launched = r->rank < 0 && strata_launch_detect(&l) == STRATA_OK &&
                      strcmp(l.launcher, "none") != 0;
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
