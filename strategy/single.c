/*
 * The `single` strategy: one device, driven by the caller's thread (device 0 may be the
 * caller's thread, as the design allows). Every lifecycle event is one action on replica 0.
 */
#include <string.h>

#include "strata/status.h"
#include "base/base.h"
#include "strategy/internal.h"

static void report(struct strata__replica *r, struct strata_metrics *m)
{
        if (m)
                *m = (struct strata_metrics){ .loss = r->loss / r->rows, .correct = r->correct,
                                              .rows = r->rows };
}

static int single_run(void *obj, int state, int event, void *arg)
{
        struct strata_runtime *rt = obj;
        struct strata__replica *r = &rt->replicas[0];
        struct strata__step_args *a = &rt->args;
        struct strata_step_ctx c;

        (void)state;
        (void)arg;
        if (rt->inj_dev == 0 && rt->inj_event == event)
                return strata__fail(rt->inj_status, "device 0: injected failure in %s",
                                    strata_event_name(event));
        switch (event) {
        case STRATA_EV_SETUP_ENVIRONMENT:
                return rt->dev->bind ? rt->dev->bind(0) : STRATA_OK;
        case STRATA_EV_CONNECT:
                strata__replica_init(r, rt->cfg.seed);
                return STRATA_OK;
        case STRATA_EV_SETUP:
                STRATA_TRY(strata__reserve_blas(rt));
                strata__replica_warm_up(r);
                return STRATA_OK;
        case STRATA_EV_BATCH_START:
                strata__replica_load(r, a->batch, 0, a->batch->rows, 1);
                return STRATA_OK;
        case STRATA_EV_TRAINING_STEP:
                c = strata__ctx(rt, 1, r->rows);
                STRATA_TRY(strata__replica_forward(r, &c));
                strata__replica_loss(r, &c, 1);
                return STRATA_OK;
        case STRATA_EV_BACKWARD:
                c = strata__ctx(rt, 1, r->rows);
                return strata__replica_backward(r, &c, NULL, NULL);
        case STRATA_EV_OPTIMIZER_STEP:
                strata__replica_clip(r, rt->cfg.clip_norm, rt->cfg.clip_value);
                strata__replica_step(r, &rt->cfg.optim);
                return STRATA_OK;
        case STRATA_EV_BATCH_END:
                /* A device that queues work reports its errors here, once per step. */
                if (rt->dev->sync)
                        STRATA_TRY(rt->dev->sync());
                report(r, a->metrics);
                return STRATA_OK;
        case STRATA_EV_VALIDATION_STEP:
        case STRATA_EV_TEST_STEP:
        case STRATA_EV_PREDICT_STEP:
                strata__replica_load(r, a->batch, 0, a->batch->rows,
                                     event != STRATA_EV_PREDICT_STEP);
                c = strata__ctx(rt, 0, r->rows);
                STRATA_TRY(strata__replica_forward(r, &c));
                if (event == STRATA_EV_PREDICT_STEP) {
                        size_t n = sizeof(float) * (size_t)r->rows * r->layers[r->nlayers - 1].out;

                        if (rt->dev->host_visible)
                                memcpy(a->logits, r->y[r->nlayers - 1], n);
                        else
                                rt->dev->to_host(a->logits, r->y[r->nlayers - 1], n);
                        return rt->dev->sync ? rt->dev->sync() : STRATA_OK;
                }
                strata__replica_loss(r, &c, 0);
                if (rt->dev->sync)
                        STRATA_TRY(rt->dev->sync());
                report(r, a->metrics);
                return STRATA_OK;
        }
        return strata__fail(STRATA_EINVAL, "single: unhandled event %d", event);
}

#define S { NULL, single_run, NULL }
static const struct strata_sm_state single_states[STRATA_STATE_COUNT] = {
        S, S, S, S, S, S, S, S, S, S,
};

const struct strata__strategy strata__single = {
        .name = "single",
        .states = single_states,
};
