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

static int spawn_child(int rank, int size, void *arg)
{
        const struct args *a = arg;

        (void)size;
        spawned_rank = rank;
        optind = 1;
        return train(a->argc, a->argv);
}

/** @brief 1 in a process --strategy spawn started. */
int spawned(void)
{
        return spawned_rank >= 0;
}

/** @brief --strategy spawn's parent: o->devices processes; the job's exit status. */
int spawn_parent(int argc, char **argv, const struct opts *o)
{
        struct args a = { argc, argv };
        struct strata_spawn_result res;

        if (strata_spawn(o->devices, spawn_child, &a, o->timeout_s, NULL, 0, &res) == STRATA_OK)
                return 0;
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        return res.failed_rank >= 0 ? 1 : 2;
}

/**
 * @brief This process's place in its job: a spawned one has one device; under mpi the
 *        launcher must be known (and one process a node is advised). 0, or 2.
 */
int job_setup(struct opts *o)
{
        struct strata_launch l;

        if (spawned())
                o->devices = 1; /* each spawned process is one device */
        if (o->strategy != STRATA_STRATEGY_MPI)
                return 0;
        if (strata_launch_detect(&l))
                return bad("%s%s", strata_last_error(), "");
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
