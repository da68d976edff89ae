/*
 * strata-train's arena: one mapping for everything the tool keeps, the data set (its bytes
 * r->data_bytes, from the IDX headers, --synthetic's shape or the HDF5 metadata) and what the
 * run needs beside it, sized before anything is read and held to the memory limit that
 * strata_init() applies too. Both data sources (data.c, h5data.c) map it here.
 */
#include <stdio.h>

#include "alloc/limit.h"
#include "data/idx.h"
#include "tools/train/train.h"

/* The memory this process may use (alloc/limit.h, the rule strata_init() applies too); @p why
 * says which limit it is. */
static size_t memory_limit(char *why, size_t n)
{
        struct strata__memory_limit lim;

        strata__memory_limit(NULL, &lim);
        snprintf(why, n, "%s", lim.why);
        return lim.bytes;
}

/**
 * @brief Beside the data (r->data_bytes): index lists (12 bytes a sample), a staging batch,
 *        and the step times (wall and CPU) of the whole run, all sized from the data set itself (no built-in
 *        budget); then one mapping for everything the tool keeps, if the memory limit allows.
 *        IDX files (@p p, or NULL) whose headers claim more than the limit are read through
 *        first: a cut file is called truncated.
 */
int data_map(struct run *r, char (*p)[PATH_BUF], size_t samples)
{
        const struct opts *o = &r->o;
        struct strata_arena_opts ho = STRATA_ARENA_OPTS_INIT;

        r->data_bytes += samples * 12 + (size_t)o->batch * (size_t)r->widths[0] * 8 + 8 * 4096 +
                         2 * (size_t)o->epochs * samples * sizeof(double) /
                                 (size_t)(o->batch ? o->batch : 1) +
                         (size_t)o->epochs * sizeof(double) * 8 +
                         /* float targets' staging and bce's outputs (the model's outputs,
                          * when known; h5data.c counts its own) */
                         (size_t)o->batch * (size_t)(r->nw > 0 ? r->widths[r->nw - 1] : 0) * 8;
        if (o->val_fraction > 0.0f) /* a validation loader's staging and order (sets.c) */
                r->data_bytes += (size_t)o->batch * ((size_t)r->widths[0] +
                                                     (size_t)(r->nw > 0 ? r->widths[r->nw - 1]
                                                                        : 0) + 1) * 4 +
                                 samples * 4 + 2 * 4096;
        r->mem_limit = memory_limit(r->why, sizeof(r->why));
        for (int i = 0; p && r->data_bytes > r->mem_limit && !o->synthetic && i < 4; i++)
                if (strata__idx_check_payload(p[i])) /* a cut file, not a large one */
                        return bad("%s", strata_last_error());
        if (r->data_bytes > r->mem_limit)
                return bad("the data needs %zu bytes; %s (fewer --synthetic samples, or a "
                           "larger limit)", r->data_bytes, r->why);
        /* on a huge page's boundary, where it is one or more and the limit leaves room for
         * the alignment's lead: transparent huge pages for the loader's rows, gathered from
         * all over the set (decision 0112) */
        if (strata__memory_huge(r->data_bytes, r->mem_limit - r->data_bytes))
                ho.align = STRATA_ALIGN_HUGEPAGE;
        if (strata_arena_map(&r->data, r->data_bytes, &ho))
                return bad("%s", strata_last_error());
        r->data.align = STRATA_ALIGN_CACHELINE; /* allocations stay aligned to a cache line */
        return 0;
}
