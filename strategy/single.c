/*
 * The `single` strategy: one device, driven by the caller's thread (device 0 may be the
 * caller's thread, as the design allows). Each lifecycle state's run action handles the
 * events that leave it, with the per-device work every strategy runs (strategy/step.c) on
 * device 0, inline.
 */
#include "strata/status.h"
#include "strategy/internal.h"

static int single_validate(const struct strata_config *c, const struct strata_device_ops *drv)
{
        (void)drv;
        if (c->strategy.devices != 1)
                return strata__fail(STRATA_EINVAL, "strategy single runs on 1 device, not %d",
                                    c->strategy.devices);
        return STRATA_OK;
}

static int single_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, void **priv)
{
        (void)c, (void)drv, (void)a;
        *priv = NULL; /* nothing beyond the replica */
        return STRATA_OK;
}

/* A device that queues work reports its errors at the end of each step. */
static int sync(const struct strata_runtime *rt)
{
        return rt->dev->sync ? rt->dev->sync() : STRATA_OK;
}

static int on_setup_environment(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        return rt->dev->bind ? rt->dev->bind(0) : STRATA_OK;
}

static int on_connect(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        strata__replica_init(&rt->replicas[0], rt->cfg.seed);
        return STRATA_OK;
}

static int on_setup(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(strata__prepare(rt));
        strata__replica_warm_up(&rt->replicas[0]);
        return STRATA_OK;
}

/* batch_start: batch_to_device; or an evaluation step, with its metrics. */
static int on_ready(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        const struct strata__step_args *a = arg;
        struct strata_step_ctx c;

        (void)state;
        STRATA_TRY(strata__injected(rt, 0, event));
        strata__split(rt, a->batch);
        if (event == STRATA__EV_BATCH_START) {
                strata__dev_load(rt, 0, a, 1);
                return STRATA_OK;
        }
        c = strata__ctx(rt, 0, a->batch->rows);
        STRATA_TRY(strata__dev_eval(rt, 0, a, &c, event == STRATA__EV_PREDICT_STEP));
        STRATA_TRY(sync(rt));
        if (event != STRATA__EV_PREDICT_STEP)
                strata__metrics(rt, a->metrics);
        return STRATA_OK;
}

static int on_training_step(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        const struct strata__step_args *a = arg;
        struct strata_step_ctx c = strata__ctx(rt, 1, a->batch->rows);

        (void)state;
        STRATA_TRY(strata__injected(rt, 0, event));
        return strata__dev_forward(rt, 0, &c);
}

static int on_backward(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        const struct strata__step_args *a = arg;
        struct strata_step_ctx c = strata__ctx(rt, 1, a->batch->rows);

        (void)state;
        STRATA_TRY(strata__injected(rt, 0, event));
        return strata__dev_backward(rt, 0, &c, NULL);
}

static int on_batch_end(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        const struct strata__step_args *a = arg;

        (void)state;
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(sync(rt));
        strata__metrics(rt, a->metrics);
        return STRATA_OK;
}

/* optimizer_step, or batch_end of an accumulation micro-batch. */
static int on_backward_done(void *obj, int state, int event, void *arg)
{
        if (event != STRATA__EV_OPTIMIZER_STEP)
                return on_batch_end(obj, state, event, arg);
        STRATA_TRY(strata__injected(obj, 0, event));
        return strata__dev_step(obj, 0, NULL, arg);
}

static const struct strata__sm_state single_states[STRATA_STATE_COUNT] = {
        [STRATA_STATE_CREATED] = { .run = on_setup_environment },
        [STRATA_STATE_ENV_READY] = { .run = on_connect },
        [STRATA_STATE_CONNECTED] = { .run = on_setup },
        [STRATA_STATE_READY] = { .run = on_ready },
        [STRATA_STATE_IN_BATCH] = { .run = on_training_step },
        [STRATA_STATE_FORWARD_DONE] = { .run = on_backward },
        [STRATA_STATE_BACKWARD_DONE] = { .run = on_backward_done },
        [STRATA_STATE_STEPPED] = { .run = on_batch_end },
        [STRATA_STATE_ERROR] = { 0 },
        [STRATA_STATE_TORNDOWN] = { 0 },
};

const struct strata__strategy strata__single = {
        .name = "single",
        .validate = single_validate,
        .layout = single_layout,
        .states = single_states,
        .collective = strata__local_collective,
        .is_global_zero = strata__is_global_zero,
        .root_device = strata__root_device,
        .world_size = strata__world_size,
        .handles_gradient_accumulation = 1,
        .invariant = 1,
};
