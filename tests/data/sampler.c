/* The sampler follows PyTorch's DistributedSampler: rank-strided, padded or dropped. */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"

static _Alignas(4096) unsigned char mem[1 << 16];

Test(sampler, ranks_cover_everything_padding_wraps)
{
        struct strata_arena a;
        struct strata_sampler s[3];
        int seen[10] = { 0 };

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        for (int r = 0; r < 3; r++) {
                cr_assert_eq(strata_sampler_init(&s[r], &a, 10, 3, r, 1, 0, 5), STRATA_OK);
                cr_assert_eq(s[r].per_rank, 4, "ceil(10 / 3)");
                strata_sampler_set_epoch(&s[r], 2);
        }
        for (int r = 0; r < 3; r++)
                for (uint32_t i = 0; i < 4; i++)
                        seen[s[r].indices[i]]++;
        for (int k = 0; k < 10; k++)
                cr_assert_geq(seen[k], 1, "index %d missed", k);
        /* 12 slots for 10 samples: the 2 padded ones repeat the permutation's first ones. */
        cr_assert_eq(s[1].indices[3], s[1].perm[0]);
        cr_assert_eq(s[2].indices[3], s[2].perm[1]);
}

Test(sampler, drop_last_and_determinism)
{
        struct strata_arena a;
        struct strata_sampler s, t;
        uint32_t e0[5], e1[5];

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_sampler_init(&s, &a, 11, 2, 1, 1, 1, 3), STRATA_OK);
        cr_assert_eq(s.per_rank, 5, "floor(11 / 2)");
        cr_assert_eq(strata_sampler_init(&t, &a, 11, 2, 1, 1, 1, 3), STRATA_OK);
        strata_sampler_set_epoch(&s, 0);
        memcpy(e0, s.indices, sizeof(e0));
        strata_sampler_set_epoch(&t, 0);
        cr_assert_eq(memcmp(e0, t.indices, sizeof(e0)), 0, "same seed and epoch, same order");
        strata_sampler_set_epoch(&s, 1);
        memcpy(e1, s.indices, sizeof(e1));
        cr_assert_neq(memcmp(e0, e1, sizeof(e0)), 0, "a new epoch reshuffles");
}

Test(sampler, unshuffled_is_strided_range)
{
        struct strata_arena a;
        struct strata_sampler s;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_sampler_init(&s, &a, 8, 4, 2, 0, 0, 0), STRATA_OK);
        cr_assert_eq(s.indices[0], 2);
        cr_assert_eq(s.indices[1], 6);
}

Test(sampler, bad_arguments)
{
        struct strata_arena a;
        struct strata_sampler s;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_sampler_init(&s, &a, 0, 1, 0, 1, 0, 0), STRATA_EINVAL);
        cr_assert_eq(strata_sampler_init(&s, &a, 8, 2, 2, 1, 0, 0), STRATA_EINVAL);
        cr_assert_eq(strata_sampler_init(&s, &a, 8, 0, 0, 1, 0, 0), STRATA_EINVAL);
        cr_assert_eq(strata_sampler_init(&s, &a, 1, 2, 0, 1, 1, 0), STRATA_EINVAL);
        cr_assert_eq(strata_arena_used(&a), 0);
}
