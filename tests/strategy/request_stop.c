/*
 * strata_request_stop() from a signal handler: the next step returns STRATA_ESTOPPED having
 * done nothing, at an optimizer-step boundary, and the runtime can still save and tear down.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

static void on_usr2(int sig)
{
        (void)sig;
        strata_request_stop();
}

static void params(struct strata_runtime *rt, float *out, size_t n)
{
        const float *p;
        size_t np;

        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_leq(np, n);
        memcpy(out, p, np * sizeof(float));
}

Test(request_stop, signal_handler_stops_the_next_step_and_nothing_runs)
{
        float before[1024] = { 0 }, after[1024] = { 0 };
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_config c;
        struct rig r;
        char path[64];

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.train.accumulate = 2;
        signal(SIGUSR2, on_usr2);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        rig_steps(&r, rt, 1, &b); /* inside an accumulation window */
        raise(SIGUSR2);
        cr_assert(strata_stop_requested());
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "the window is completed");
        params(rt, before, 1024);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_ESTOPPED);
        cr_assert_not_null(strstr(strata_last_error(), "stop requested"));
        cr_assert_eq(strata_eval_step(rt, &b, NULL), STRATA_ESTOPPED);
        params(rt, after, 1024);
        cr_assert_eq(memcmp(before, after, sizeof(before)), 0, "a stopped step changed nothing");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        snprintf(path, sizeof(path), "/tmp/strata-stop-%d.ckpt", (int)getpid());
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        unlink(path);
        strata_clear_stop();
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "steps run again");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
