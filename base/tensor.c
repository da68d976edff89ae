/* Tensor descriptors. */
#include "strata/tensor.h"
#include "strata/status.h"
#include "base/base.h"

size_t strata_dtype_size(enum strata_dtype dtype)
{
        static const size_t sizes[STRATA_DTYPE_COUNT] = { 4, 8, 2, 2, 4, 8, 1 };

        return (unsigned)dtype < STRATA_DTYPE_COUNT ? sizes[dtype] : 0;
}

int strata_tensor_init(struct strata_tensor *t, void *data, enum strata_dtype dtype, int rank,
                       const int64_t *shape, int device)
{
        int64_t n = 1, stride = 1;
        struct strata_tensor r = { 0 };

        if (!t || (rank > 0 && !shape))
                return strata__fail(STRATA_EINVAL, "tensor init: NULL argument");
        if (rank < 0 || rank > STRATA_MAX_RANK)
                return strata__fail(STRATA_EINVAL, "tensor init: rank %d not in [0, %d]", rank,
                                    STRATA_MAX_RANK);
        if (!strata_dtype_size(dtype))
                return strata__fail(STRATA_EINVAL, "tensor init: unknown dtype %d", (int)dtype);
        for (int i = rank - 1; i >= 0; i--) {
                if (shape[i] < 0)
                        return strata__fail(STRATA_EINVAL, "tensor init: extent %d is %lld", i,
                                            (long long)shape[i]);
                r.shape[i] = shape[i];
                r.stride[i] = stride;
                if (__builtin_mul_overflow(n, shape[i], &n) ||
                    __builtin_mul_overflow(stride, shape[i] ? shape[i] : 1, &stride))
                        return strata__fail(STRATA_EOVERFLOW, "tensor init: element count overflows");
        }
        if (!data && n != 0)
                return strata__fail(STRATA_EINVAL, "tensor init: data is NULL");
        r.data = data;
        r.dtype = dtype;
        r.rank = rank;
        r.device = device;
        *t = r;
        return STRATA_OK;
}

int64_t strata_tensor_numel(const struct strata_tensor *t)
{
        int64_t n = 1;

        for (int i = 0; t && i < t->rank; i++)
                n *= t->shape[i];
        return t ? n : 0;
}

int strata_tensor_is_contiguous(const struct strata_tensor *t)
{
        int64_t s = 1;

        for (int i = t ? t->rank - 1 : -1; i >= 0; i--) {
                if (t->shape[i] != 1 && t->stride[i] != s)
                        return 0;
                s *= t->shape[i];
        }
        return t != NULL;
}
