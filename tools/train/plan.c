/*
 * strata-train --plan: the exact memory a run takes, without training. The runtime's region is
 * strata_plan()'s (the layout strata_init() carves, to the byte: each device's sub-arena and
 * what the devices share); the tool's own arena holds the data set, its indices, the staging
 * and the step times (arena.c, mapped already to read the data). Their sum is set against what
 * this process may use (alloc/limit.h: physical memory, the cgroup, rlimits).
 */
#include <stdint.h>
#include <stdio.h>

#include "tools/train/train.h"

/* One device's share, as text or as a JSON object. */
static void plan_device(const struct strata_plan_info *p, int d, int json)
{
        if (json) {
                printf("%s{\"device\":%d,\"bytes\":%zu,\"optimizer_bytes\":%zu,"
                       "\"shard_params\":%zu,\"layer_bytes\":%zu,\"device_bytes\":%zu,"
                       "\"pinned_bytes\":%zu}", d ? "," : "", d, p->per_device,
                       p->optimizer_bytes, p->shard_params, p->layer_bytes, p->device_bytes,
                       p->pinned_bytes);
                return;
        }
        printf("  device %d: %zu bytes (optimizer state %zu, parameters owned %zu", d,
               p->per_device, p->optimizer_bytes, p->shard_params);
        if (p->layer_bytes)
                printf(", gathered layer %zu", p->layer_bytes);
        if (p->device_bytes || p->pinned_bytes)
                printf("; %zu in device memory, %zu pinned", p->device_bytes, p->pinned_bytes);
        printf(")\n");
}

/* The whole plan as one JSON object; @p sync: the synchronisation variant asked for. */
static void plan_json(const struct run *r, const struct strata_plan_info *p, const char *sync,
                      int procs, size_t total, int fits)
{
        printf("{\"plan\":true,\"strategy\":\"%s\",\"processes\":%d,\"devices\":%d,"
               "\"model\":\"%s\",\"batch\":%d,\"params\":%zu,\"sync\":\"%s\","
               "\"per_device\":[", strata_strategy_name(r->o.strategy), procs,
               r->cfg.strategy.devices, r->o.model, r->o.batch, p->params, sync);
        for (int d = 0; d < r->cfg.strategy.devices; d++)
                plan_device(p, d, 1);
        printf("],\"runtime_bytes\":%zu,\"align\":%zu,\"data_bytes\":%zu,"
               "\"total_bytes\":%zu,", p->bytes, p->align, r->data_bytes, total);
        if (r->mem_limit == SIZE_MAX)
                printf("\"limit_bytes\":null,");
        else
                printf("\"limit_bytes\":%zu,", r->mem_limit);
        printf("\"limit\":\"%s\",\"fits\":%s}\n", r->why, fits ? "true" : "false");
}

/*
 * The plan as text: the devices, the two arenas, the total and whether it fits, then the
 * synchronisation variant @p sync asks for.
 */
static void plan_text(const struct run *r, const struct strata_plan_info *p, const char *sync,
                      int procs, size_t total, int fits)
{
        printf("strata-train: memory plan of %s, %d device(s) a process, %d process(es); model "
               "%s (%zu parameters), batch %d\n", strata_strategy_name(r->o.strategy),
               r->cfg.strategy.devices, procs, r->o.model, p->params, r->o.batch);
        if (r->cfg.inference_only)
                printf("  inference only (--predict): no gradients, optimizer state or "
                       "activation gradients\n");
        for (int d = 0; d < r->cfg.strategy.devices; d++)
                plan_device(p, d, 0);
        printf("  runtime arena: %zu bytes (the devices' sub-arenas and what they share; "
               "aligned to %zu)\n", p->bytes, p->align);
        printf("  data arena: %zu bytes (the data set, its indices, staging, step times)\n",
               r->data_bytes);
        printf("  total: %zu bytes a process; %s: %s\n", total, r->why,
               fits ? "it fits" : "it does NOT fit");
        printf("  synchronisation: %s\n", sync);
}

/**
 * @brief --plan: the configuration planned once the data was read (the model may be sized from
 *        it) and printed by the job's first process, as text or --json; nothing is started or
 *        trained. spawn and --processes plan in the processes they start, whose plan holds
 *        the link between them. 0, or the exit status.
 */
int plan_show(struct run *r)
{
        struct strata_plan_info p;
        int procs = job_size(), rc;
        const char *sync;
        size_t total;

        if ((rc = config_fill(r)) || (rc = config_check(r)))
                return rc;
        if (strata_plan(&r->cfg, &p) || strata_plan_sync(&r->cfg, &sync))
                return bad("%s", strata_last_error());
        total = p.bytes + r->data_bytes;
        if (r->rank > 0)
                ; /* one voice per job */
        else if (r->o.json)
                plan_json(r, &p, sync, procs, total, total <= r->mem_limit);
        else
                plan_text(r, &p, sync, procs, total, total <= r->mem_limit);
        strata_arena_release(&r->data);
        return stdout_failed();
}
