/*
 * Weights packed once (decision 0078): in an inference-only replica each Linear keeps its
 * weight packed the way the device's GEMM packs op(B) = W^T on every call (the kernel table's
 * optional gemm_pack / gemm_pb), in planned memory taken from the device arena after the carve
 * pass. The copy is the layer's aux (naux_fixed floats; a Linear declares no aux, so a
 * training replica's layers and plan are unchanged). It is rewritten from the weights
 * whenever they change (connect, load_weights): the same packed data and kernels as the
 * per-call packing, so the same bits.
 *
 * Packed once a step for every device (decision 0106): in a training forward where the devices
 * are threads of one process that meet (the split step, strategy/step.c), a Linear's W^T is
 * packed by all of them together, each its part (the kernel table's gemm_pack_part), into one
 * copy in the home replica's gradient of that layer, which its next backward overwrites and
 * nothing reads before; they meet, and each device's GEMM reads the copy (gemm_pb).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "strata/status.h"
#include "alloc/floats.h"
#include "base/base.h"
#include "nn/replica_private.h"
#include "nn/shape.h"

/* A layer whose forward can read a packed weight: a Linear on a driver that packs. */
static int packs(const struct strata_kernel_ops *k, const struct strata_module *desc)
{
        return desc->ops == &strata_linear && k->gemm_pack_floats && k->gemm_pack && k->gemm_pb;
}

int strata__packed_plan(struct strata__replica *r, struct strata_arena *d,
                        const struct strata_model *m, int inference)
{
        struct strata__shape_walk walk;

        if (!inference)
                return STRATA_OK;
        STRATA_TRY(strata__shape_start(m, &walk));
        for (int i = 0; i < m->nmodules; i++) {
                struct strata_module_shape s;
                struct strata_layer tmp;
                size_t n;
                float *p;

                STRATA_TRY(strata__shape_step(m, i, &walk, &tmp, &s));
                if (!packs(r->v.k, &m->modules[i]))
                        continue;
                n = r->v.k->gemm_pack_floats(tmp.out, tmp.in);
                STRATA_TRY(strata__arena_floats(d, n, &p));
                if (r->v.layers) {
                        r->v.layers[i].aux = p;
                        r->v.layers[i].naux_fixed = n;
                }
        }
        return STRATA_OK;
}

void strata__packed_refresh(struct strata__replica *r)
{
        for (int i = 0; r->v.layers && i < r->v.nlayers; i++) {
                struct strata_layer *l = &r->v.layers[i];

                if (packs(r->v.k, l->desc) && l->naux_fixed)
                        r->v.k->gemm_pack(l->param, l->in, l->out, l->in, l->aux);
        }
}

#ifdef STRATA_TESTING
int strata__packed_unshared;
_Atomic uint64_t strata__packed_shared;
#endif

/*
 * A Linear of fewer outputs runs on the CPU's GEMM as its transpose, which packs the input,
 * not W (drivers/cpu/gemm.c narrow()): nothing of a shared copy would be read.
 */
#define SHARE_MIN_OUT 64

/* Where layer @p l's shared copy starts in @p h, home's same layer: its gradient, from a line. */
static float *copy_at(const struct strata_layer *h)
{
        return (float *)(((uintptr_t)h->grad + 63) / 64 * 64);
}

/* Module @p i's input storage, as the pass gives it (replica_pass.c layer_begin()). */
static enum strata_dtype in_type(const struct strata__replica *r, int i)
{
        return i > 0 && !r->v.layers[i].desc->branch ? r->ytype[i - 1] : STRATA_F32;
}

int strata__packed_shares(const struct strata__replica *r, const struct strata__replica *home,
                          const struct strata_step_ctx *c, int i)
{
        const struct strata_kernel_ops *k = r->v.k;
        const struct strata_layer *l = &r->v.layers[i], *h;

#ifdef STRATA_TESTING
        if (strata__packed_unshared > 0)
                return 0;
#endif
        if (!home || !c->train || !c->barrier || c->world < 2 || c->chunks ||
            !packs(k, l->desc) || !k->gemm_pack_part || l->naux_fixed || !l->grad_fresh ||
            l->out < SHARE_MIN_OUT || r->compute != STRATA_F32 || r->ytype[i] != STRATA_F32 ||
            in_type(r, i) != STRATA_F32)
                return 0;
        h = &home->v.layers[i];
        return h->grad && (size_t)(copy_at(h) - h->grad) +
                                  k->gemm_pack_floats(l->out, l->in) <= h->nparam;
}

int strata__packed_share(struct strata__replica *r, struct strata__replica *home,
                         const struct strata_step_ctx *c, int i)
{
        struct strata_layer *l = &r->v.layers[i];
        float *copy = copy_at(&home->v.layers[i]);

        r->v.k->gemm_pack_part(l->param, l->in, l->out, l->in, copy, c->rank, c->world);
        STRATA_TRY(c->barrier(c)); /* every part stored before any device reads the copy */
#ifdef STRATA_TESTING
        atomic_fetch_add_explicit(&strata__packed_shared, 1, memory_order_relaxed);
#endif
        l->aux = copy;
        l->naux_fixed = r->v.k->gemm_pack_floats(l->out, l->in);
        return STRATA_OK;
}
