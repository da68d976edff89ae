/*
 * Device drivers: a `static const` table of operations per kind of device, with a probe.
 *
 * Every operation works on memory of the driver's own device. Float math is f32. Operations a
 * driver lacks are NULL, and callers get STRATA_ENOTSUP; the mandatory ones are checked when a
 * runtime picks the driver (strata_device_driver()).
 */
#ifndef STRATA_DEVICE_H
#define STRATA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/** Accelerator kinds. */
enum strata_accelerator {
        STRATA_ACCEL_CPU = 0,
        STRATA_ACCEL_CUDA = 1,
        STRATA_ACCEL_COUNT
};

/** Operations of a device driver. Matrices are row-major. */
struct strata_device_ops {
        const char *name;
        /** Non-zero when the device can run here; @p why gets a reason otherwise. */
        int (*probe)(const char **why);
        /** C = alpha * op(A) op(B) + beta * C, op = transpose when ta/tb. */
        void (*gemm)(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc);
        /** Each of @p rows rows of y (cols wide) := bias. */
        void (*fill_rows)(float *y, const float *bias, int rows, int cols);
        /** y = max(x, 0), n elements (in place allowed). */
        void (*relu)(const float *x, float *y, size_t n);
        /** dx = dy where y > 0 else 0 (in place allowed). */
        void (*relu_backward)(const float *y, const float *dy, float *dx, size_t n);
        /** s[j] (+)= sum over rows of x[i][j]; accumulate when @p acc. */
        void (*col_sums)(const float *x, int rows, int cols, float *s, int acc);
        /**
         * Softmax cross-entropy on logits [rows, cols] with labels; returns the summed loss;
         * writes dlogits = (softmax - onehot) * scale when dlogits is not NULL; counts correct
         * argmax predictions into *correct when not NULL.
         */
        double (*softmax_xent)(const float *logits, const int32_t *labels, int rows, int cols,
                               float scale, float *dlogits, int *correct);
        /**
         * y = x * mask, mask from a counter-based stream: keep with probability 1-p. Element i
         * uses the stream's value number first + i, so a slice of a batch draws the same mask
         * as the whole batch would.
         */
        void (*dropout)(const float *x, float *y, float *mask, size_t n, float p, uint64_t seed,
                        uint64_t stream, uint64_t first);
        /** dst = src, n floats. */
        void (*copy)(float *dst, const float *src, size_t n);
        /** dst = value, n floats. */
        void (*fill)(float *dst, float value, size_t n);
        /** dst = a * b elementwise. */
        void (*mul)(const float *a, const float *b, float *dst, size_t n);
};

/**
 * @brief The driver for an accelerator kind, after checking its mandatory operations.
 * @param kind  The accelerator.
 * @param out   Receives the driver.
 * @retval STRATA_OK, STRATA_EINVAL (unknown kind), STRATA_ENODEV (built without it, or its
 *         probe fails: the message gives the reason).
 */
int strata_device_driver(enum strata_accelerator kind, const struct strata_device_ops **out);

#endif /* STRATA_DEVICE_H */
