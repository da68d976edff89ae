/*
 * The `single` strategy: one device, driven by the caller's thread (device 0 may be the
 * caller's thread, as the design allows). Each lifecycle state's run action handles the
 * events that leave it, on replica 0.
 */
#include <string.h>

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

static struct strata__replica *replica(void *obj)
{
        return &((struct strata_runtime *)obj)->replicas[0];
}

/* A device that queues work reports its errors at the end of each step. */
static int sync(const struct strata_runtime *rt)
{
        return rt->dev->sync ? rt->dev->sync() : STRATA_OK;
}

static void report(struct strata_runtime *rt)
{
        const struct strata__replica *r = replica(rt);

        if (rt->args.metrics)
                *rt->args.metrics = (struct strata_metrics){ .loss = r->loss_sum / r->rows,
                                                             .correct = r->correct,
                                                             .rows = r->rows };
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
        strata__replica_init(replica(rt), rt->cfg.seed);
        return STRATA_OK;
}

static int on_setup(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(strata__prepare(rt));
        strata__replica_warm_up(replica(rt));
        return STRATA_OK;
}

/* validation, test and predict steps: forward in evaluation mode, then loss or logits. */
static int evaluate(struct strata_runtime *rt, int event)
{
        struct strata__replica *r = replica(rt);
        int predict = event == STRATA_EV_PREDICT_STEP;
        struct strata_step_ctx c;

        strata__replica_load(r, rt->args.batch, 0, rt->args.batch->rows, !predict);
        c = strata__ctx(rt, 0, r->rows);
        STRATA_TRY(strata__replica_forward(r, &c));
        if (predict) {
                size_t n = sizeof(float) * (size_t)r->rows * r->layers[r->nlayers - 1].out;

                rt->dev->to_host(rt->args.logits, r->y[r->nlayers - 1], n);
                return sync(rt);
        }
        strata__replica_loss(r, &c, 0);
        STRATA_TRY(sync(rt));
        report(rt);
        return STRATA_OK;
}

/* batch_start: batch_to_device; or an evaluation step. */
static int on_ready(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        if (event != STRATA_EV_BATCH_START)
                return evaluate(rt, event);
        strata__replica_load(replica(rt), rt->args.batch, 0, rt->args.batch->rows, 1);
        return STRATA_OK;
}

static int on_training_step(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__replica *r = replica(rt);
        struct strata_step_ctx c = strata__ctx(rt, 1, r->rows);

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(strata__replica_forward(r, &c));
        strata__replica_loss(r, &c, 1);
        return STRATA_OK;
}

static int on_backward(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__replica *r = replica(rt);
        struct strata_step_ctx c = strata__ctx(rt, 1, r->rows);

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        return strata__replica_backward(r, &c, NULL, NULL);
}

static int on_batch_end(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;

        (void)state, (void)arg;
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(sync(rt));
        report(rt);
        return STRATA_OK;
}

/* optimizer_step, or batch_end of an accumulation micro-batch. */
static int on_backward_done(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__replica *r = replica(rt);
        int skip;

        if (event != STRATA_EV_OPTIMIZER_STEP)
                return on_batch_end(obj, state, event, arg);
        STRATA_TRY(strata__injected(rt, 0, event));
        STRATA_TRY(strata__unscale_step(rt, 0, NULL, &skip));
        if (skip)
                return STRATA_OK;
        strata__replica_clip(r, rt->cfg.train.clip_norm, rt->cfg.train.clip_value);
        strata__replica_step(r, &rt->cfg.optim);
        return STRATA_OK;
}

static const struct strata_sm_state single_states[STRATA_STATE_COUNT] = {
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
};
