/*
 * Under several processes each checks the rows its devices compute, and a batch refused in
 * one process is refused in every process at the same step, with the same status, at once
 * (not after timeout_s): a NaN input in process 1's rows, for train, eval and predict; a
 * predict array too small in one process; batches of different rows. The job then goes on,
 * and three good steps around the refusals are bitwise ddp's three steps on 2 devices.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/rig.h"

#define NP 4096

static struct rig job_rig; /* set up by the parent: the children inherit it */

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Refused with EINVAL and, in @p rank 0, the message naming process 1's rows. */
static int refused(int rc, int rank, const char *why)
{
        if (rc != STRATA_EINVAL)
                return 0;
        if (rank == 0)
                return strstr(strata_last_error(), why) &&
                       strstr(strata_last_error(), "in process 1's rows; every process refused");
        return strstr(strata_last_error(), "row numbers from row 8, this process's first") != NULL;
}

/* The job's steps; a non-zero return names the check that failed (no assertion here). */
static int agreeing_child(int rank, int size, void *arg)
{
        static float x[RIG_BATCH * RIG_IN], t[RIG_BATCH * RIG_OUT], out[RIG_BATCH * RIG_OUT];
        struct strata_config c = rig_cfg(&job_rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t np;
        double t0;

        (void)size, (void)arg;
        c.device.timeout_s = 60.0; /* a refusal must not wait for it */
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&job_rig.loader, job_rig.idx, 256);
        for (int s = 0; s < 3; s++) {
                if (strata_loader_next(&job_rig.loader, &b) != 1)
                        return 11;
                memcpy(x, b.x, sizeof(x));
                memcpy(t, b.t, sizeof(t));
                b.x = x;
                b.t = t;
                if (s == 1) {
                        if (rank == 1)
                                x[(RIG_BATCH - 2) * RIG_IN + 3] = NAN; /* row 14: process 1's */
                        t0 = now_s();
                        if (!refused(strata_train_step(rt, &b, NULL), rank, "input of row"))
                                return 20;
                        if (!refused(strata_eval_step(rt, &b, NULL), rank, "input of row"))
                                return 21;
                        x[(RIG_BATCH - 2) * RIG_IN + 3] = 0.5f;
                        if (strata_predict_step(rt, &b, out, rank == 1 ? 5 : sizeof(out) /
                                                sizeof(out[0])) != STRATA_EINVAL)
                                return 22;
                        b.rows = rank == 1 ? RIG_BATCH - 1 : RIG_BATCH;
                        if (strata_train_step(rt, &b, NULL) != STRATA_EINVAL ||
                            !strstr(strata_last_error(), "the processes' batches differ"))
                                return 23;
                        if (now_s() - t0 > 20.0)
                                return 24;
                        memcpy(x, job_rig.loader.x, sizeof(x));
                        b.rows = RIG_BATCH;
                }
                if (strata_train_step(rt, &b, NULL) != STRATA_OK)
                        return 30 + s;
        }
        if (strata_parameters(rt, 0, &p, &np) || strata_spawn_return(p, np * sizeof(*p)))
                return 40;
        return strata_teardown(rt) == STRATA_OK ? 0 : 41;
}

Test(batch_agreement, a_refusal_in_one_process_is_every_processs, .timeout = 120)
{
        static float ref[NP], got[NP];
        struct strata_spawn_result res;
        struct strata_config c;
        int fd = open("/tmp/strata-processes-tests.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        size_t np;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan: a fork of the threaded test runner cannot be followed");
        /* One job at a time with tests/strategy/processes.c, which watches /dev/shm. */
        cr_assert_geq(fd, 0);
        cr_assert_eq(flock(fd, LOCK_EX), 0);
        rig_init_regression(&job_rig, &strata_mse);
        cr_assert_eq(strata_spawn(2, agreeing_child, NULL, 30.0, got, sizeof(got), &res),
                     STRATA_OK, "%s (exit %d of rank %d)", strata_last_error(), res.status,
                     res.failed_rank);
        c = rig_cfg(&job_rig, STRATA_STRATEGY_DDP, 2, 0);
        {
                struct strata_runtime *rt = rig_open(&c);
                const float *p;

                rig_steps(&job_rig, rt, 3, NULL);
                cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
                cr_assert_leq(np, NP);
                memcpy(ref, p, np * sizeof(float));
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        cr_assert_eq(memcmp(ref, got, np * sizeof(float)), 0,
                     "spawn 2 after the refusals != ddp's 3 steps");
}
