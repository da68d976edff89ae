/*
 * strata_clear_stop() forgets a stop request everywhere it was kept: after a stop and a clear,
 * the next step runs, and a new request stops the run as a first one does. Across processes
 * the job's agreed stop (the last exchange's) is forgotten too: a request made by one process
 * after the clear counts only once the next step's exchange carried it, so every process
 * still stops at the same step boundary (before, the process that asked stopped at once, on
 * the earlier stop's agreement, and the others waited for it in the step).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/cli.h"
#include "tests/support/rig.h"

/* Step, stop, clear, step, stop again, clear, step: what one process sees. */
static void stop_twice(enum strata_strategy_kind kind, int devices)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, kind, devices, 0);
        rt = rig_open(&c);
        rig_steps(&r, rt, 1, &b);
        for (int round = 0; round < 2; round++) {
                strata_request_stop();
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_ESTOPPED, "round %d", round);
                cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_ESTOPPED, "round %d", round);
                strata_clear_stop();
                cr_assert_eq(strata_stop_requested(), 0);
                cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "round %d: %s", round,
                             strata_last_error());
                cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_OK, "round %d", round);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(clear_stop, one_device_steps_again_and_stops_again, .timeout = 60)
{
        stop_twice(STRATA_STRATEGY_SINGLE, 1);
}

Test(clear_stop, ddp_2_steps_again_and_stops_again, .timeout = 60)
{
        stop_twice(STRATA_STRATEGY_DDP, 2);
}

static struct rig rig; /* set up by the parent: the children inherit it */

/* The next step returns @p want, else the child exits 10 + @p at. */
#define STEP(at, want)                                                                     \
        do {                                                                               \
                if (strata_train_step(rt, &b, NULL) != (want))                             \
                        return 10 + (at);                                                  \
        } while (0)

/*
 * A spawned process of one device. Process 0 asks to stop: both stop one step later; both
 * clear. Then process 1 alone asks: both take the next step, whose exchange carries the
 * request, and stop at the one after.
 */
static int twice_child(int rank, int size, void *arg)
{
        struct strata_config c = rig_cfg(&rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;

        (void)size, (void)arg;
        c.device.timeout_s = 2.0;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 9;
        strata_loader_reset(&rig.loader, rig.idx, 256);
        if (!strata_loader_next(&rig.loader, &b))
                return 9;
        STEP(0, STRATA_OK);
        if (rank == 0)
                strata_request_stop();
        STEP(1, STRATA_OK); /* its exchange carries process 0's request */
        STEP(2, STRATA_ESTOPPED);
        strata_clear_stop();
        if (rank == 1)
                strata_request_stop();
        STEP(3, STRATA_OK); /* process 1's request, not yet the job's */
        STEP(4, STRATA_ESTOPPED);
        strata_clear_stop();
        STEP(5, STRATA_OK);
        strata_teardown(rt);
        return 0;
}

Test(clear_stop, spawn_2_a_new_request_stops_every_process_at_one_step, .timeout = 120)
{
        struct strata_spawn_result res;
        int rc;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (see tests/strategy/processes.c)");
        cli_serial_jobs();
        rig_init(&rig, 0);
        rc = strata_spawn(2, twice_child, NULL, 10.0, NULL, 0, &res);
        cr_assert_eq(rc, STRATA_OK, "%s (rank %d, status %d: %s)", strata_last_error(),
                     res.failed_rank, res.status,
                     res.why);
}
