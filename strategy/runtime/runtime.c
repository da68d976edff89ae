/*
 * The live runtime: init, connect and teardown, the registry of live runtimes every call
 * checks, what a runtime tells about itself (parameters, memory, properties) and the hooks
 * that inject failures for tests. The plan and layout are strategy/runtime/plan.c; the Strategy
 * API's steps and collectives are strategy/runtime/api.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kernel/lifecycle.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "strategy/job.h"
#include "strategy/multi.h"

/*
 * The live runtimes. Every call checks its runtime here before touching it, so a runtime that
 * was torn down (its memory unmapped, or the caller's and reused) is refused, not followed.
 * A runtime made later at the same address passes: pointers carry no generation.
 */
#define LIVE_MAX 256
static _Atomic(struct strata_runtime *) live[LIVE_MAX];

static int live_add(struct strata_runtime *rt)
{
        for (int i = 0; i < LIVE_MAX; i++) {
                struct strata_runtime *none = NULL;

                if (atomic_compare_exchange_strong(&live[i], &none, rt))
                        return STRATA_OK;
        }
        return strata__fail(STRATA_EINVAL, "more than %d runtimes alive in this process",
                            LIVE_MAX);
}

static void live_remove(const struct strata_runtime *rt)
{
        for (int i = 0; i < LIVE_MAX; i++) {
                struct strata_runtime *me = (struct strata_runtime *)rt;

                if (atomic_compare_exchange_strong(&live[i], &me, NULL))
                        return;
        }
}

static int live_has(const struct strata_runtime *rt)
{
        for (int i = 0; rt && i < LIVE_MAX; i++)
                if (atomic_load_explicit(&live[i], memory_order_acquire) == rt)
                        return 1;
        return 0;
}

/* No thread uses the devices' driver scratch any more (it goes with the region). */
static void forget_scratch(const struct strata_runtime *rt)
{
        for (int d = 0; d < rt->nreplicas && rt->dev->forget; d++)
                rt->dev->forget(strata__replica_scratch(strata__rep(rt, d)));
}

int strata_init(struct strata_runtime **out, const struct strata_config *cfg)
{
        const struct strata__strategy *st;
        const struct strata_device_ops *dev;
        struct strata_plan_info pl, pi = { 0 };
        struct strata_runtime *rt = NULL;
        struct strata_arena root;
        struct strata__regions rg;
        const struct strata__sync *sync;
        int rc;

        if (!out)
                return strata__fail(STRATA_EINVAL, "init: runtime pointer is NULL");
        STRATA_TRY(strata__check_config(cfg, &st, &dev, 0));
        STRATA_TRY(strata_plan(cfg, &pl));
        STRATA_TRY(strata__open_region(cfg, &pl, &root));
        STRATA_TRY_GOTO(rc, strata__reserve(cfg, dev, &pl, &rg), fail_region);
        STRATA_TRY_GOTO(rc, strata__layout(cfg, st, dev, &root, &rg, &rt, &pi, &sync), fail);
        rt->cfg = *cfg;
        rt->dev = dev;
        rt->strategy = st;
        rt->job = strata__strategy_job(cfg->strategy.kind);
        rt->plan = pl;
        rt->region_mapped = !cfg->memory;
        rt->root = root;
        strata__multi(rt)->sync = sync; /* picked once, the replicas laid out */
        STRATA_TRY_GOTO(rc, strata__lifecycle_table(&rt->table, strata__strategy_states), fail);
        STRATA_TRY_GOTO(rc, strata__sm_init(&rt->sm, &rt->table, rt), fail);
        {
                char name[64];

                snprintf(name, sizeof(name), "strata %s (%s), rank 0 (pid %ld)", st->name,
                         strata__multi(rt)->sync->name, (long)getpid());
                STRATA_TRY_GOTO(rc, strata__trace_open(rt->trace, 0, name,
                                                       strata__kernels_of(cfg, dev)), fail);
        }
        STRATA_TRY_GOTO(rc, strata__sm_dispatch(&rt->sm, STRATA__EV_SETUP_ENVIRONMENT, NULL), fail);
        STRATA_TRY_GOTO(rc, live_add(rt), fail);
        strata__models_bind(rt, rt->models); /* cfg.models is now in use */
        if (cfg->verbose) {
                strata__log(STRATA_LOG_INFO, "strata: %s on %d %s device(s), %zu parameters, "
                            "%zu bytes planned (%zu per device)%s",
                        st->name, cfg->strategy.devices, dev->name, pi.params, pl.bytes,
                        pl.per_device, cfg->inference_only ? ", inference only: no gradients, "
                        "optimizer state or master copies" : "");
                if (pl.device_bytes)
                        strata__log(STRATA_LOG_INFO, "strata: per device %zu bytes of device "
                                    "memory (%zu for the driver), %zu pinned staging",
                                pl.device_bytes, dev->device_overhead, pl.pinned_bytes);
                for (int d = 0; d < cfg->strategy.devices && dev->describe; d++) {
                        char line[512];

                        dev->describe(d, line, sizeof(line));
                        strata__log(STRATA_LOG_INFO, "strata: %s", line);
                }
        }
        *out = rt;
        return STRATA_OK;
fail:
        if (rt && rt->sm.table)
                (void)strata__sm_dispatch(&rt->sm, STRATA__EV_TEARDOWN, NULL);
        if (rt) {
                strata__trace_discard(rt->trace);
                rt->dev = dev;
                forget_scratch(rt);
        }
        strata__unreserve(dev, &rg, cfg->strategy.devices);
fail_region:
        if (!cfg->memory)
                (void)strata_arena_release(&root);
        return rc;
}

int strata__check_rt(const struct strata_runtime *rt)
{
        if (!live_has(rt))
                return strata__fail(STRATA_EINVAL, "runtime %p is not live (NULL, never "
                                                   "initialised, or torn down)", (const void *)rt);
        return STRATA_OK;
}

int strata_connect(struct strata_runtime *rt)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(strata__sm_dispatch(&rt->sm, STRATA__EV_CONNECT, NULL));
        STRATA_TRY(strata__sm_dispatch(&rt->sm, STRATA__EV_SETUP, NULL));
        STRATA_TRY(strata__models_connect(rt));
        for (int d = 0; d < rt->nreplicas; d++) /* inference: the weights packed (0078) */
                strata__packed_refresh(strata__rep(rt, d));
        strata_arena_seal(&rt->root);
        for (int d = 0; d < rt->nreplicas; d++)
                strata_arena_seal(strata__replica_arena(strata__rep(rt, d)));
        return STRATA_OK;
}

int strata_teardown(struct strata_runtime *rt)
{
        struct strata_arena root;
        int rc, mapped;

        STRATA_TRY(strata__check_rt(rt));
        rc = strata__sm_dispatch(&rt->sm, STRATA__EV_TEARDOWN, NULL);
        if (rc != STRATA_OK)
                return rc;
        live_remove(rt); /* from here on every call on rt is refused */
        forget_scratch(rt);
        /* The devices have stopped recording, unless one was abandoned. */
        rc = strata__trace_close(rt->trace, !rt->abandoned);
        if (rt->abandoned) /* a stuck device may still touch all of it: nothing is released */
                return strata__set_error(STRATA_ETIMEDOUT, rt->abandoned_why);
        if (strata__own_memory(rt->dev)) {
                strata__unreserve(rt->dev, &rt->regions, rt->nreplicas);
                memset(&rt->regions, 0, sizeof(rt->regions));
        }
        root = rt->root;
        mapped = rt->region_mapped;
        if (mapped) { /* rt lived in this region */
                int rel = strata_arena_release(&root);

                return rc != STRATA_OK ? rc : rel;
        }
        return rc;
}

int strata_flush_trace(struct strata_runtime *rt)
{
        STRATA_TRY(strata__check_rt(rt));
        return strata__trace_flush(rt->trace);
}

int strata_trace_counts(const struct strata_runtime *rt, uint64_t *written, uint64_t *dropped)
{
        struct strata__trace_stats st;

        STRATA_TRY(strata__check_rt(rt));
        if (!written || !dropped)
                return strata__fail(STRATA_EINVAL, "trace counts: NULL output");
        strata__trace_get_stats(rt->trace, &st);
        *written = st.events;
        *dropped = st.dropped;
        return STRATA_OK;
}

int strata_state(const struct strata_runtime *rt)
{
        return live_has(rt) ? strata__sm_state(&rt->sm) : -1;
}

static int connected(const struct strata_runtime *rt, int dev)
{
        int s;

        STRATA_TRY(strata__check_rt(rt));
        if (dev < 0 || dev >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "device %d not in [0, %d)", dev,
                                    rt->nreplicas);
        s = strata__sm_state(&rt->sm);
        if (s < STRATA_STATE_READY || s == STRATA_STATE_TORNDOWN)
                return strata__fail(STRATA_EBADSTATE, "runtime is %s: parameters not ready",
                                    strata_state_name(s));
        return STRATA_OK;
}

/* A host pointer to n floats of device memory: itself, or a copy in the pinned staging. */
static const float *host_view(const struct strata_runtime *rt, int dev, const float *src,
                              size_t n)
{
        if (!n)
                return src;
        return rt->dev->host_view(strata__replica_host_image(strata__rep(rt, dev)), src,
                                  n * sizeof(float));
}

int strata_parameters(const struct strata_runtime *rt, int dev, const float **p, size_t *n)
{
        STRATA_TRY(connected(rt, dev));
        if (!p || !n)
                return strata__fail(STRATA_EINVAL, "parameters: NULL output");
        *n = strata__shard_owned(strata__rep_shard(rt, dev)); /* fsdp: the device's shard */
        *p = host_view(rt, dev, strata__repv(rt, dev)->params, *n);
        return STRATA_OK;
}

int strata_optimizer_state(const struct strata_runtime *rt, int dev, const float **state,
                           size_t *n, uint64_t *step)
{
        STRATA_TRY(connected(rt, dev));
        if (!state || !n || !step)
                return strata__fail(STRATA_EINVAL, "optimizer state: NULL output");
        strata__dev_opt_whole(rt); /* after split steps, each part in its own replica */
        *state = host_view(rt, dev, strata__repv(rt, dev)->opt_state, strata__repv(rt, dev)->nopt);
        *n = strata__repv(rt, dev)->nopt;
        *step = strata__replica_steps(strata__rep(rt, dev));
        return STRATA_OK;
}

int strata_parameter_count(const struct strata_runtime *rt, int *n)
{
        STRATA_TRY(connected(rt, 0));
        if (!n)
                return strata__fail(STRATA_EINVAL, "parameter count: NULL output");
        *n = strata__replica_nparams(strata__rep(rt, 0));
        return STRATA_OK;
}

int strata_parameter(const struct strata_runtime *rt, int dev, int index,
                     struct strata_param *out)
{
        struct strata_param p;

        STRATA_TRY(connected(rt, dev));
        if (!out)
                return strata__fail(STRATA_EINVAL, "parameter: NULL output");
        if (index < 0 || strata__replica_param(strata__rep(rt, dev), index, &p) != 0)
                return strata__fail(STRATA_EINVAL, "parameter %d not in [0, %d)", index,
                                    strata__replica_nparams(strata__rep(rt, dev)));
        strata__dev_opt_whole(rt); /* p.opt_state: after split steps, each part in its own */
        *out = p;
        return STRATA_OK;
}

int strata_parameter_copy(const struct strata_runtime *rt, int dev, int index, float *out,
                          size_t capacity, size_t *n)
{
        struct strata_param p;
        size_t held;

        STRATA_TRY(strata_parameter(rt, dev, index, &p));
        if (!out || !n)
                return strata__fail(STRATA_EINVAL, "parameter_copy: NULL output");
        if (strata__own_memory(rt->dev))
                return strata__fail(STRATA_ENOTSUP, "parameter_copy: the values are in %s "
                                    "memory (strata_parameters() gives a host view)",
                                    rt->dev->name);
        held = (strata__caps(rt->strategy) & STRATA__CAP_SHARD_PARAMS) && p.grad
               ? p.shard_hi - p.shard_lo : p.group.count;
        if (capacity < held)
                return strata__fail(STRATA_EINVAL, "parameter_copy: %s has %zu values here; "
                                    "out holds %zu", p.name, held, capacity);
        memcpy(out, p.value, held * sizeof(float));
        *n = held;
        return STRATA_OK;
}

int strata_outputs(const struct strata_runtime *rt, int *outputs)
{
        STRATA_TRY(strata__check_rt(rt));
        if (!outputs)
                return strata__fail(STRATA_EINVAL, "outputs: NULL output");
        *outputs = rt->cfg.classes;
        return STRATA_OK;
}

int strata_memory(const struct strata_runtime *rt, struct strata_memory_info *out)
{
        uint64_t refused;

        STRATA_TRY(strata__check_rt(rt));
        if (!out)
                return strata__fail(STRATA_EINVAL, "memory: out is NULL");
        refused = strata_arena_refusals(&rt->root);
        for (int d = 0; d < rt->nreplicas; d++)
                refused += strata_arena_refusals(strata__replica_arena(strata__rep(rt, d)));
        *out = (struct strata_memory_info){ .planned = rt->plan.bytes,
                                            .used = strata_arena_high_water(&rt->root),
                                            .refusals = refused };
        return STRATA_OK;
}

int strata_grad_scaler_state(const struct strata_runtime *rt, struct strata_grad_scaler *out)
{
        STRATA_TRY(strata__check_rt(rt));
        if (!out)
                return strata__fail(STRATA_EINVAL, "grad_scaler_state: out is NULL");
        *out = rt->scaler;
        return STRATA_OK;
}

int strata_is_global_zero(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->rank0 == 0 : 0;
}

int strata_sync_variant(const struct strata_runtime *rt, const char **name)
{
        if (!name)
                return strata__fail(STRATA_EINVAL, "sync_variant: name is NULL");
        if (!live_has(rt))
                return strata__fail(STRATA_EINVAL, "sync_variant: not a live runtime");
        *name = strata__multi(rt)->sync->name;
        return STRATA_OK;
}

int strata_root_device(const struct strata_runtime *rt)
{
        (void)rt;
        return 0; /* dp's master, rank 0's device elsewhere: this process's first device */
}

int strata_handles_gradient_accumulation(const struct strata_runtime *rt)
{
        return live_has(rt); /* every strategy: no_sync on accumulation micro-batches */
}

int strata_world_size(const struct strata_runtime *rt)
{
        return live_has(rt) ? rt->world : 0;
}

int strata_device_rank(const struct strata_runtime *rt, int dev)
{
        return live_has(rt) && dev >= 0 && dev < rt->nreplicas ? rt->rank0 + dev : -1;
}

#ifdef STRATA_TESTING
/* The runtime's faults object, taken from the test pool the first time a test arms one. */
static struct strata__faults *faults(struct strata_runtime *rt)
{
        if (!rt->faults)
                rt->faults = strata__faults_take();
        return rt->faults;
}

int strata__inject_failure(struct strata_runtime *rt, int device, int event, int status)
{
        STRATA_TRY(strata__check_rt(rt));
        if (device < -1 || device >= rt->nreplicas || event < 0 || event >= STRATA__EV_COUNT ||
            status >= 0)
                return strata__fail(STRATA_EINVAL, "inject: device %d, event %d, status %d",
                                    device, event, status);
        faults(rt)->who = device;
        rt->faults->point = event;
        rt->faults->status = status;
        return STRATA_OK;
}

int strata__inject_nonfinite_grad(struct strata_runtime *rt, int device)
{
        STRATA_TRY(strata__check_rt(rt));
        if (device < 0 || device >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "inject_nonfinite_grad: device %d of %d",
                                    device, rt->nreplicas);
        faults(rt)->nonfinite[device] = 1;
        return STRATA_OK;
}
#endif /* STRATA_TESTING */
