/*
 * The `single` strategy: one device, driven by the caller's thread (device 0 may be the
 * caller's thread, as the design allows), which it binds to the device and does not pin. It
 * is the multi-device parent run by the inline executor: every state and hook is the
 * parent's, with no workers and no communicator (one device decides its steps alone).
 */
#include <string.h>

#include "strata/status.h"
#include "strategy/multi.h"

static int single_validate(const struct strata__strategy *st, const struct strata_config *c,
                           const struct strata_device_ops *drv)
{
        (void)st, (void)drv;
        if (c->strategy.devices != 1)
                return strata__fail(STRATA_EINVAL, "strategy single runs on 1 device, not %d",
                                    c->strategy.devices);
        return STRATA_OK;
}

/* The parent's state alone, with the inline executor. */
static int single_layout(const struct strata_config *c, const struct strata_device_ops *drv,
                         struct strata_arena *a, void **priv)
{
        struct strata__multi *m;
        void *p;

        (void)c, (void)drv;
        STRATA_TRY(strata_arena_alloc(a, sizeof(*m), 64, &p));
        m = p;
        if (m) {
                memset(m, 0, sizeof(*m));
                m->ex = &strata__inline_executor;
        }
        *priv = m;
        return STRATA_OK;
}

const struct strata__strategy strata__single = {
        .name = "single",
        .parent = &strata__multi_parent,
        .caps = STRATA__CAP_INVARIANT | STRATA__CAP_MODELS,
        .ops = { .validate = single_validate, .layout = single_layout },
};
