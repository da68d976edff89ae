/*
 * strata-train's processes: --strategy spawn (the parent forks the processes, each runs the
 * tool with one device), mpi's launcher, this process's rank in its job, its trace file, and
 * the fault injection the job tests use.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "tools/train/train.h"

/* A spawned process's rank; -1 in the parent and in every other job. */
static int spawned_rank = -1;

struct args {
        int argc;
        char **argv;
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
        const struct args *a = arg;
        int rc;

        (void)size;
        spawned_rank = rank;
        optind = 1;
        rc = train(a->argc, a->argv);
        if (!stop_status(rc))
                return rc;
        strata_spawn_return(&rc, sizeof(rc));
        return 0;
}

/** @brief 1 in a process --strategy spawn started. */
int spawned(void)
{
        return spawned_rank >= 0;
}

/**
 * @brief --strategy spawn's parent: o->devices processes (zero1, zero2, fsdp: --processes); the
 *        job's exit status, that of a
 *        single process: 128 + the signal when a stop signal (forwarded by strata_spawn() when
 *        the parent gets it) stopped the job.
 */
int spawn_parent(int argc, char **argv, const struct opts *o)
{
        struct args a = { argc, argv };
        struct strata_spawn_result res;
        int status = 0;

        int n = o->processes > 1 ? o->processes : o->devices;

        if (strata_spawn(n, spawn_child, &a, o->timeout_s, &status, sizeof(status), &res) ==
            STRATA_OK)
                return res.bytes == sizeof(status) ? status : 0;
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        if (res.failed_rank >= 0 && stop_status(res.status))
                return res.status; /* killed by the signal before it could stop */
        return res.failed_rank >= 0 ? 1 : 2;
}

/**
 * @brief This process's place in its job: a spawned one has one device; under mpi the
 *        launcher must be known (and one process a node is advised). 0, or 2.
 */
int job_setup(struct opts *o)
{
        struct strata_launch l;

        if (spawned() && o->strategy == STRATA_STRATEGY_SPAWN)
                o->devices = 1; /* each spawned process is one device */
        if (o->strategy != STRATA_STRATEGY_MPI)
                return 0;
        if (strata_launch_detect(&l))
                return bad("%s", strata_last_error());
        if (l.local_size > 1 && o->devices == 1 && l.local_rank == 0)
                fprintf(stderr, "strata-train: %d processes of one device share this host: one "
                                "process per node with --devices %d is faster (its devices "
                                "share memory)\n",
                        l.local_size, l.local_size);
        return 0;
}

/* This process's rank in its job: spawned, from the launcher, or 0. */
int process_rank(void)
{
        struct strata_launch l;

        if (spawned_rank >= 0)
                return spawned_rank;
        return strata_launch_detect(&l) == STRATA_OK ? l.rank : 0;
}

/*
 * Tests of a job's faults: STRATA_TRAIN_FAULT=kill:RANK:STEP, hang:RANK:STEP or stop:RANK:STEP
 * makes process RANK kill itself (SIGKILL) or stop responding before its training step STEP,
 * or stop (SIGSTOP: every thread) 2 ms into that step, wherever its devices then are.
 */
static void stop_self(int sig)
{
        (void)sig;
        raise(SIGSTOP);
}

void fault(long step)
{
        static int kind = -1, rank;
        static long at;
        char what[8];

        if (kind < 0) {
                const char *f = getenv("STRATA_TRAIN_FAULT");

                kind = 0;
                if (f && sscanf(f, "%7[a-z]:%d:%ld", what, &rank, &at) == 3 &&
                    rank == process_rank())
                        kind = !strcmp(what, "kill") ? 1 : !strcmp(what, "hang") ? 2
                               : !strcmp(what, "stop") ? 3 : 0;
        }
        if (!kind || step != at)
                return;
        if (kind == 1)
                raise(SIGKILL);
        if (kind == 3) {
                struct itimerval in_2ms = { .it_value = { 0, 2000 } };

                signal(SIGALRM, stop_self);
                setitimer(ITIMER_REAL, &in_2ms, NULL);
                return;
        }
        for (;;)
                pause();
}

/* The trace of a process other than the job's first goes beside it: FILE.<process>. */
const char *trace_path(const struct opts *o, char *buf, size_t n)
{
        int rank = process_rank();

        if (!o->trace)
                return NULL;
        if (rank <= 0)
                return o->trace;
        snprintf(buf, n, "%s.%d", o->trace, rank);
        return buf;
}
