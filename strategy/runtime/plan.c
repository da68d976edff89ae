/*
 * The memory plan and the layout of a runtime, and the memory it is carved from.
 *
 * One layout function carves everything a configuration needs. Run against a planning arena
 * it yields strata_plan()'s exact byte count; run against the real region it builds the
 * runtime. Both paths are the same code, so the plan cannot drift from what init does.
 */
#include <string.h>

#include "alloc/limit.h"
#include "alloc/numa.h"
#include "strata/status.h"
#include "base/base.h"
#include "strategy/job.h"

#define REGION_ALIGN STRATA_ALIGN_PAGE

static int region_arena(void *mem, size_t bytes, const char *name, struct strata_arena *out)
{
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

        o.name = name;
        o.kind = STRATA_MEM_DEVICE;
        if (!mem)
                return strata_arena_init_plan(out, &o);
        return strata_arena_init(out, mem, bytes, &o);
}

/*
 * What a replica shards besides the optimizer state: what the strategy's synchronisation
 * variant asks of it (strata__strategy_ops.pick(), decision 0062), picked from the
 * configuration and the driver before any replica exists.
 */
static unsigned shard_how(const struct strata_config *c, const struct strata__strategy *st,
                          const struct strata_device_ops *drv)
{
        return STRATA__INHERITED(st, ops.pick)(c, drv, NULL, NULL)->shard;
}

/*
 * The driver's scratch for one device (drv->scratch_bytes(): the CPU's GEMM packing buffer),
 * first in the device's arena (whole lines: the replica after it pads as without it), so
 * strata_plan()'s per-device bytes count it.
 */
static int driver_scratch(const struct strata_device_ops *drv, struct strata_arena *a,
                          void **out)
{
        size_t n = drv->scratch_bytes ? drv->scratch_bytes() : 0;

        *out = NULL;
        return n ? strata_arena_alloc(a, n, STRATA_ALIGN_CACHELINE, out) : STRATA_OK;
}

/*
 * Model @p i's replica (decision 0069) on the device of plan @p rp (model 0's), in @p mem after
 * what is there: built into @p r with the driver's scratch @p scratch, or (@p r NULL) planned.
 * Its outputs must be its classes.
 */
static int extra_replica(const struct strata_config *c, int i,
                         const struct strata__replica_mem *mem,
                         const struct strata__replica_plan *rp, struct strata__replica *r,
                         void *scratch)
{
        struct strata__replica_plan xp = *rp;
        struct strata__replica_view v;
        int classes;

        STRATA_TRY(strata__models_plan(c, i, &xp, &classes));
        if (r) {
                STRATA_TRY(strata__replica_layout(r, mem, &xp, NULL));
                strata__replica_place(r, scratch, mem->host);
                return STRATA_OK;
        }
        STRATA_TRY(strata__replica_plan_only(mem, &xp, NULL, &v));
        if (v.out != classes)
                return strata__fail(STRATA_EINVAL, "model %d outputs %d values per row; its "
                                                   "classes is %d", i, v.out, classes);
        return STRATA_OK;
}

/* The single layout of a runtime; with a planning arena, *out stays NULL and nothing is built. */
int strata__layout(const struct strata_config *c, const struct strata__strategy *st,
                   const struct strata_device_ops *drv, struct strata_arena *a,
                   const struct strata__regions *rg, struct strata_runtime **out,
                   struct strata_plan_info *pi, const struct strata__sync **sync)
{
        struct strata_arena plan, pdev, ppin, child, dev, pin;
        struct strata__replica_mem mem = { &plan, &plan, NULL, drv };
        struct strata__replica_view tmp;
        struct strata__replica *reps;
        struct strata_runtime *rt;
        struct strata__trace *tr;
        struct strata__chunk_plan cp;
        struct strata__replica_plan rp;
        struct strata__shard_sizes sz;
        struct strata__models *ms;
        int world, rows, shards, hv = !strata__own_memory(drv), nm = strata__models_count(c);
        enum strata_dtype compute = strata__precision(c->precision.kind)->compute;
        void *p;

        STRATA_TRY(strata__world(c, &world));
        rows = (c->batch + world - 1) / world; /* each device's share of the global batch */
        if (strata__invariant_chunks(c)) { /* invariant mode: whole chunks, rounded up */
                strata__chunks_plan(strata__invariant_chunks(c), world, c->batch, &cp);
                rows = cp.rows;
        }
        /* zero1, zero2, fsdp: the optimizer state sharded over the world */
        shards = strata__caps(st) & STRATA__CAP_SHARD_STATE ? world : 1;
        STRATA_TRY(strata_arena_init_plan(&plan, NULL));
        STRATA_TRY(strata_arena_init_plan(&pdev, NULL));
        STRATA_TRY(strata_arena_init_plan(&ppin, NULL));
        if (!hv) {
                mem.dev = &pdev;
                mem.pinned = &ppin;
        }
        rp = (struct strata__replica_plan){ .model = c->model, .optim = &c->optim,
                                            .rows_max = rows, .compute = compute,
                                            .grad_comm = c->strategy.grad_allreduce,
                                            .shards = shards, .how = shard_how(c, st, drv),
                                            .chunks = strata__invariant_chunks(c) ? &cp : NULL,
                                            .fuse = !c->device.no_fusion,
                                            .inference = c->inference_only };
        STRATA_TRY(driver_scratch(drv, &plan, &p));
        STRATA_TRY(strata__replica_plan_only(&mem, &rp, &sz, &tmp));
        if (tmp.out != c->classes) /* the logits, the loss and predict's rows x classes */
                return strata__fail(STRATA_EINVAL, "the model outputs %d values per row (%s%s)"
                                                   "; classes is %d", tmp.out,
                                    c->model->noutputs ? "its outputs' widths' sum" : "its "
                                    "last module, ", c->model->noutputs ? "" :
                                    c->model->modules[c->model->nmodules - 1].ops->name,
                                    c->classes);
        for (int i = 1; i < nm; i++) /* the other models, after model 0's in each device's */
                STRATA_TRY(extra_replica(c, i, &mem, &rp, NULL, NULL));
        pi->per_device = strata_arena_used(&plan);
        pi->device_bytes = hv ? 0 : strata_arena_used(&pdev);
        pi->pinned_bytes = hv ? 0 : strata_arena_used(&ppin);
        pi->params = tmp.nparam;
        pi->optimizer_bytes = tmp.nopt * sizeof(float);
        pi->shard_params = sz.len;
        pi->layer_bytes = (sz.lbuf + sz.lgrad) * sizeof(float);
        STRATA_TRY(strata_arena_alloc(a, sizeof(*rt), 0, &p));
        rt = p;
        STRATA_TRY(strata_arena_alloc(a, strata__replica_bytes * (size_t)c->strategy.devices, 0,
                                      &p));
        reps = p;
        STRATA_TRY(strata__models_layout(c, a, &ms));
        for (int d = 0; d < c->strategy.devices; d++) {
                struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;

                o.name = "device";
                STRATA_TRY(strata_arena_carve(a, &child, pi->per_device, &o));
                mem = (struct strata__replica_mem){ &child, &child, NULL, drv };
                if (!hv) {
                        STRATA_TRY(region_arena(rt ? rg->dev[d] : NULL, rt ? rg->dev_bytes : 0,
                                                "device memory", &dev));
                        STRATA_TRY(region_arena(rt ? rg->pin[d] : NULL, rt ? rg->pin_bytes : 0,
                                                "pinned staging", &pin));
                        mem.dev = &dev;
                        mem.pinned = &pin;
                }
                rp.dev = d;
                STRATA_TRY(driver_scratch(drv, &child, &p));
                if (reps) {
                        struct strata__replica *r = strata__replica_at(reps, d);

                        STRATA_TRY(strata__replica_layout(r, &mem, &rp, NULL));
                        strata__replica_place(r, p, &child);
                } else {
                        STRATA_TRY(strata__replica_plan_only(&mem, &rp, NULL, &tmp));
                }
                for (int i = 1; i < nm; i++)
                        STRATA_TRY(extra_replica(c, i, &mem, &rp, ms ? strata__replica_at(
                                strata__models_replicas(ms, i), d) : NULL, p));
        }
        STRATA_TRY(strata__trace_layout(a, c->strategy.devices,
                                       c->trace.events ? c->trace.events : (size_t)1 << 16,
                                       c->trace.path, &tr));
        if (rt) {
                memset(rt, 0, sizeof(*rt));
                rt->trace = tr;
                for (int d = 0; d < c->strategy.devices; d++)
                        strata__replica_set_track(strata__replica_at(reps, d),
                                                  strata__trace_track(tr, d));
                rt->replicas = reps;
                rt->nreplicas = c->strategy.devices;
                for (int i = 1; i < nm; i++)
                        for (int d = 0; d < c->strategy.devices; d++)
                                strata__replica_set_track(strata__replica_at(
                                        strata__models_replicas(ms, i), d),
                                                          strata__trace_track(tr, d));
                rt->world = world; /* rank0 is set when the processes are joined */
                rt->prec = strata__precision(c->precision.kind);
                strata__scaler_init(&rt->scaler, c->precision.loss_scale_init,
                                    (uint32_t)c->precision.loss_scale_interval);
                if (!hv)
                        rt->regions = *rg;
        }
        {
                struct strata_config resolved = *c; /* the job's processes, as planned */

                resolved.process.count = world / c->strategy.devices;
                STRATA_TRY(STRATA__INHERITED(st, ops.layout)(&resolved, drv, a, &p));
                STRATA_TRY(strata__strategy_job(c->strategy.kind)->layout(
                        &resolved, !!(strata__caps(st) & STRATA__CAP_SHARD_STATE), a, p));
        }
        if (rt) {
                rt->priv = p;
                rt->models = ms; /* strata_init() binds them once the runtime lives */
        }
        if (sync) /* the variant once more, from what the shard and the replicas made */
                *sync = STRATA__INHERITED(st, ops.pick)(c, drv, &sz, rt);
        *out = rt;
        return STRATA_OK;
}

int strata_plan(const struct strata_config *cfg, struct strata_plan_info *out)
{
        const struct strata__strategy *st;
        const struct strata_device_ops *dev;
        struct strata_plan_info pi = { 0 };
        struct strata_runtime *rt;
        struct strata_arena a;

        if (!out)
                return strata__fail(STRATA_EINVAL, "plan: out is NULL");
        STRATA_TRY(strata__check_config(cfg, &st, &dev, 1));
        STRATA_TRY(strata_arena_init_plan(&a, NULL));
        STRATA_TRY(strata__layout(cfg, st, dev, &a, NULL, &rt, &pi, NULL));
        pi.bytes = strata_arena_used(&a);
        pi.align = strata_arena_max_align(&a) > REGION_ALIGN ? strata_arena_max_align(&a)
                                                             : REGION_ALIGN;
        if (pi.device_bytes)
                pi.device_bytes += dev->device_overhead;
        *out = pi;
        return STRATA_OK;
}

int strata_plan_sync(const struct strata_config *cfg, const char **name)
{
        const struct strata__strategy *st;
        const struct strata_device_ops *dev;

        const struct strata__sync *sync;
        struct strata_plan_info pi = { 0 };
        struct strata_runtime *rt;
        struct strata_arena a;

        if (!name)
                return strata__fail(STRATA_EINVAL, "plan_sync: name is NULL");
        STRATA_TRY(strata__check_config(cfg, &st, &dev, 1));
        STRATA_TRY(strata_arena_init_plan(&a, NULL));
        STRATA_TRY(strata__layout(cfg, st, dev, &a, NULL, &rt, &pi, &sync));
        *name = sync->name;
        return STRATA_OK;
}

/* Give back the driver's reservations of devices [0, n). */
void strata__unreserve(const struct strata_device_ops *dev, struct strata__regions *rg, int n)
{
        for (int d = 0; d < n && dev->unreserve; d++)
                dev->unreserve(d, rg->dev[d], rg->pin[d]);
}

/* Reserve each device's memory and staging from the driver, all or nothing. */
int strata__reserve(const struct strata_config *c, const struct strata_device_ops *dev,
                    const struct strata_plan_info *pl, struct strata__regions *rg)
{
        memset(rg, 0, sizeof(*rg));
        if (!strata__own_memory(dev)) /* it computes in host memory from the region */
                return STRATA_OK;
        rg->dev_bytes = pl->device_bytes - dev->device_overhead;
        rg->pin_bytes = pl->pinned_bytes;
        for (int d = 0; d < c->strategy.devices; d++) {
                int rc = dev->reserve(d, pl->device_bytes, rg->pin_bytes,
                                      c->precision.allow_tf32 ? STRATA_DEV_TF32 : 0u, &rg->dev[d],
                                      &rg->pin[d]);

                if (rc != STRATA_OK) {
                        strata__unreserve(dev, rg, d);
                        return rc;
                }
        }
        return STRATA_OK;
}

/*
 * The host memory the library would map (the region, and each device's pinned staging) must
 * fit what the process can get: refused here, not by the kernel's OOM killer once the pages
 * are touched (the region is mapped MAP_NORESERVE). A caller's own region is not checked.
 */
static int fits_the_process(const struct strata_config *c, const struct strata_plan_info *pl,
                            size_t *room)
{
        struct strata__memory_limit lim;
        size_t pin, need;

        if (strata__mul_size(pl->pinned_bytes, (size_t)c->strategy.devices, &pin) ||
            strata__add_size(pl->bytes, pin, &need))
                return strata__fail(STRATA_EOVERFLOW, "init: the plan's host memory overflows");
        strata__memory_limit(NULL, &lim);
        *room = need <= lim.bytes ? lim.bytes - need : 0;
        if (need <= lim.bytes)
                return STRATA_OK;
        return strata__fail(STRATA_ENOMEM, "init: this configuration needs %zu bytes of host "
                                           "memory; the process can get %zu: %s (a smaller "
                                           "model or batch, fewer devices, or a region of your "
                                           "own in cfg.memory)",
                            need, lim.bytes, lim.why);
}

/*
 * Whether the region the runtime maps starts on a huge page's boundary, so that the mapping
 * asks for transparent huge pages (decision 0112): a region of a huge page or more, the
 * limits leaving room for the alignment's lead while it is mapped (@p room), and no device to
 * bind its memory to one of several NUMA nodes: init writes into the devices' parts before
 * they are bound, and a huge page faulted in then would stay on the writer's node.
 */
static int huge_pages(const struct strata_config *c, const struct strata_plan_info *pl,
                      size_t room)
{
        return strata__memory_huge(pl->bytes, room) &&
               (c->device.bind == STRATA_BIND_NONE || strata__numa_single());
}

int strata__open_region(const struct strata_config *c, const struct strata_plan_info *pl,
                        struct strata_arena *a)
{
        struct strata_arena_opts o = STRATA_ARENA_OPTS_INIT;
        uintptr_t start, pad;
        size_t room;

        o.name = "runtime";
        if (!c->memory) { /* a caller's own region needs only pl->align */
                STRATA_TRY(fits_the_process(c, pl, &room));
                o.align = huge_pages(c, pl, room) ? STRATA_ALIGN_HUGEPAGE : pl->align;
                STRATA_TRY(strata_arena_map(a, pl->bytes, &o));
                o.align = 0;
                a->align = STRATA_ALIGN_CACHELINE;
                return STRATA_OK;
        }
        start = (uintptr_t)c->memory;
        pad = STRATA__ALIGN_UP(start, pl->align) - start;
        if (c->memory_size < pad || c->memory_size - pad < pl->bytes)
                return strata__fail(STRATA_ENOMEM,
                                    "memory region is %zu bytes; this configuration needs %zu "
                                    "(%zu + %zu to align the region to %zu)",
                                    c->memory_size, pl->bytes + (size_t)pad, pl->bytes,
                                    (size_t)pad, pl->align);
        o.align = pl->align;
        STRATA_TRY(strata_arena_init(a, c->memory, c->memory_size, &o));
        a->align = STRATA_ALIGN_CACHELINE;
        return STRATA_OK;
}
