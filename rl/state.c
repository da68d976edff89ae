/*
 * What every RL object shares: the layout walk, the configuration digest, carving the block,
 * the finiteness check of what an application hands in, and the state's save and restore
 * (the block is the whole state, so a checkpoint is its bytes).
 */
#include <math.h>
#include <string.h>

#include "strata/rl.h"
#include "base/base.h"
#include "rl/rl.h"

#define RL_ALIGN 64

size_t strata__rl_take(struct strata__rl_walk *w, size_t n, size_t size)
{
        size_t off = STRATA__ALIGN_UP(w->off, RL_ALIGN), bytes, end;

        if (strata__mul_size(n, size, &bytes) || strata__add_size(off, bytes, &end) ||
            end > SIZE_MAX / 2) {
                w->overflow = 1;
                return 0;
        }
        w->off = end;
        return off;
}

uint64_t strata__rl_digest(const uint64_t *words, size_t n)
{
        uint64_t h = 0xcbf29ce484222325ull;

        for (size_t i = 0; i < n; i++)
                for (int b = 0; b < 8; b++) {
                        h ^= (words[i] >> (8 * b)) & 0xff;
                        h *= 0x100000001b3ull;
                }
        return h;
}

int strata__rl_carve(struct strata_arena *arena, size_t bytes, uint64_t magic, uint64_t digest,
                     void **block)
{
        struct strata__rl_head *h;
        void *p = NULL;

        if (!arena || !block)
                return strata__fail(STRATA_EINVAL, "rl: NULL arena");
        STRATA_TRY(strata_arena_alloc(arena, bytes, RL_ALIGN, &p));
        if (p) { /* a planning arena only counts */
                memset(p, 0, bytes);
                h = p;
                h->magic = magic;
                h->digest = digest;
        }
        *block = p;
        return STRATA_OK;
}

int strata__rl_finite(const float *x, size_t n, const char *what)
{
        for (size_t i = 0; i < n; i++)
                if (!isfinite(x[i]))
                        return strata__fail(STRATA_ENONFINITE, "rl: %s[%zu] is %g: refused",
                                            what, i, (double)x[i]);
        return STRATA_OK;
}

/* The block and size of @p obj, which must be initialised. */
static int block_of(const void *obj, enum strata_rl_kind kind, void **block, size_t *bytes)
{
        if (!obj)
                return strata__fail(STRATA_EINVAL, "rl: NULL object");
        switch (kind) {
        case STRATA_RL_REPLAY:
                *block = ((const struct strata_rl_replay *)obj)->block;
                *bytes = ((const struct strata_rl_replay *)obj)->bytes;
                break;
        case STRATA_RL_ROLLOUT:
                *block = ((const struct strata_rl_rollout *)obj)->block;
                *bytes = ((const struct strata_rl_rollout *)obj)->bytes;
                break;
        case STRATA_RL_NORMALIZER:
                *block = ((const struct strata_rl_normalizer *)obj)->block;
                *bytes = ((const struct strata_rl_normalizer *)obj)->bytes;
                break;
        case STRATA_RL_NOISE:
                *block = ((const struct strata_rl_noise *)obj)->block;
                *bytes = ((const struct strata_rl_noise *)obj)->bytes;
                break;
        default:
                return strata__fail(STRATA_EINVAL, "rl: unknown object kind %d", (int)kind);
        }
        if (!*block)
                return strata__fail(STRATA_EINVAL, "rl: the object is not initialised");
        return STRATA_OK;
}

int strata_rl_state(const void *obj, enum strata_rl_kind kind, const void **mem, size_t *bytes)
{
        void *block = NULL;
        size_t n = 0;

        if (!mem || !bytes)
                return strata__fail(STRATA_EINVAL, "rl: NULL output");
        STRATA_TRY(block_of(obj, kind, &block, &n));
        *mem = block;
        *bytes = n;
        return STRATA_OK;
}

int strata_rl_restore(void *obj, enum strata_rl_kind kind, const void *mem, size_t bytes)
{
        const struct strata__rl_head *saved = mem;
        struct strata__rl_head *now;
        void *block = NULL;
        size_t n = 0;

        STRATA_TRY(block_of(obj, kind, &block, &n));
        if (!mem)
                return strata__fail(STRATA_EINVAL, "rl: NULL state");
        if (bytes != n)
                return strata__fail(STRATA_EINVAL,
                                    "rl: a state of %zu bytes for an object of %zu: refused",
                                    bytes, n);
        now = block;
        if (saved->magic != now->magic)
                return strata__fail(STRATA_EINVAL, "rl: the state is of another kind of object "
                                    "(or damaged): refused");
        if (saved->digest != now->digest)
                return strata__fail(STRATA_EINVAL, "rl: the state was saved from an object "
                                    "configured differently: refused");
        memcpy(block, mem, bytes);
        return STRATA_OK;
}
