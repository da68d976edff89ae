/*
 * Weights packed once (decision 0078): in an inference-only replica each Linear keeps its
 * weight packed the way the device's GEMM packs op(B) = W^T on every call (the kernel table's
 * optional gemm_pack / gemm_pb), in planned memory taken from the device arena after the carve
 * pass. The copy is the layer's aux (naux_fixed floats; a Linear declares no aux, so a
 * training replica's layers and plan are unchanged). It is rewritten from the weights
 * whenever they change (connect, load_weights): the same packed data and kernels as the
 * per-call packing, so the same bits. The Linears' leading dimensions are declared here too,
 * for the operands a driver reads in place (decision 0122).
 */
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

int strata__packed_lds(const struct strata__replica *r)
{
        const struct strata_kernel_ops *k = r->v.k;

        for (int i = 0; k->gemm_ld && r->v.layers && i < r->v.nlayers; i++) {
                const struct strata_layer *l = &r->v.layers[i];

                if (l->desc->ops != &strata_linear)
                        continue;
                STRATA_TRY(k->gemm_ld(l->in));
                STRATA_TRY(k->gemm_ld(l->out));
        }
        return STRATA_OK;
}
