/* The runtime object and the strategy interface (internal to strategy/). */
#ifndef STRATA_STRATEGY_INTERNAL_H
#define STRATA_STRATEGY_INTERNAL_H

#include "strata/lifecycle.h"
#include "strata/runtime.h"
#include "nn/replica.h"

#define STRATA__MAX_DEVICES 64

/** A strategy: its name, its state actions under the shared lifecycle, its device count rule. */
struct strata__strategy {
        const char *name;
        const struct strata_sm_state *states; /* STRATA_STATE_COUNT entries */
};

/** Arguments of the step events, set by the public calls before dispatching. */
struct strata__step_args {
        const struct strata_batch *batch;
        struct strata_metrics *metrics;
        float *logits;
};

struct strata_runtime {
        struct strata_sm sm;
        struct strata_sm_table table;
        struct strata_config cfg;
        const struct strata_device_ops *dev;
        const struct strata__strategy *strategy;
        struct strata_arena root;
        struct strata__replica *replicas;
        int nreplicas;
        int rows_per_device;
        uint64_t step;                 /* training steps taken */
        struct strata_plan_info plan;
        struct strata__step_args args;
        int region_mapped;             /* root maps its own region: unmap at teardown */
        struct strata_arena self;      /* the arena the runtime lives in (teardown releases it) */
};

/** The registry of strategies, indexed by enum strata_strategy_kind (NULL = not built). */
const struct strata__strategy *strata__strategy_get(enum strata_strategy_kind kind);

/** Step context for replica @p r of the runtime. */
struct strata_step_ctx strata__ctx(const struct strata_runtime *rt, int train, int rows_global);

#endif /* STRATA_STRATEGY_INTERNAL_H */
