/*
 * Tests of a job's faults: STRATA_TRAIN_FAULT=kill:RANK:STEP, hang:RANK:STEP or stop:RANK:STEP
 * makes process RANK kill itself (SIGKILL) or stop responding before its training step STEP,
 * or stop (SIGSTOP: every thread) 2 ms into that step, wherever its devices then are.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "tools/train/train.h"

static void stop_self(int sig)
{
        (void)sig;
        raise(SIGSTOP);
}

/** @brief Before training step @p step of the process of rank @p rank: its fault, if named. */
void fault(int rank, long step)
{
        static int kind = -1, at_rank;
        static long at;
        char what[8];

        if (kind < 0) {
                const char *f = getenv("STRATA_TRAIN_FAULT");

                kind = 0;
                if (f && sscanf(f, "%7[a-z]:%d:%ld", what, &at_rank, &at) == 3 &&
                    at_rank == rank)
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
