/*
 * The distributed sampler: one rank's share of each epoch's order (shuffled with Philox),
 * padded or cut as PyTorch's DistributedSampler does (contract in include/strata/data.h).
 */
#include <stdint.h>

#include "strata/data.h"
#include "strata/status.h"
#include "base/base.h"
#include "kernel/philox.h"

int strata_sampler_init(struct strata_sampler *s, struct strata_arena *arena, uint32_t n,
                        int world, int rank, int shuffle, int drop_last, uint64_t seed)
{
        uint32_t per;
        void *a, *b;

        if (!s || !arena || n == 0 || world <= 0 || rank < 0 || rank >= world)
                return strata__fail(STRATA_EINVAL, "sampler: n %u, world %d, rank %d invalid", n,
                                    world, rank);
        if (drop_last && n < (uint32_t)world)
                return strata__fail(STRATA_EINVAL, "sampler: drop_last with %u samples < %d ranks",
                                    n, world);
        /* PyTorch: drop the tail so every rank has n / world, or pad up to ceil(n / world). */
        per = drop_last ? n / (uint32_t)world : (n + (uint32_t)world - 1) / (uint32_t)world;
        STRATA_TRY(strata_arena_alloc(arena, (size_t)per * sizeof(uint32_t), 0, &a));
        STRATA_TRY(strata_arena_alloc(arena, (size_t)n * sizeof(uint32_t), 0, &b));
        *s = (struct strata_sampler){ .n = n, .world = world, .rank = rank, .shuffle = shuffle,
                                      .drop_last = drop_last, .seed = seed, .per_rank = per,
                                      .indices = a, .perm = b };
        strata_sampler_set_epoch(s, 0);
        return STRATA_OK;
}

void strata_sampler_set_epoch(struct strata_sampler *s, uint64_t epoch)
{
        uint32_t n = s->n;

        for (uint32_t i = 0; i < n; i++)
                s->perm[i] = i;
        if (s->shuffle) {
                for (uint32_t i = n - 1; i > 0; i--) {
                        struct strata__philox4 r = strata__philox(s->seed + epoch, 7, i);
                        uint32_t j = (uint32_t)(((uint64_t)r.v[0] * (i + 1)) >> 32);
                        uint32_t t = s->perm[i];

                        s->perm[i] = s->perm[j];
                        s->perm[j] = t;
                }
        }
        /* Global position k of this rank's i-th sample is rank + i * world; past n it wraps. */
        for (uint32_t i = 0; i < s->per_rank; i++) {
                uint64_t k = (uint64_t)s->rank + (uint64_t)i * (uint64_t)s->world;

                s->indices[i] = s->perm[k % n];
        }
}
