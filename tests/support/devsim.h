/*
 * A simulated device with memory of its own, as a GPU has: the CPU
 * driver's math, but every replica tensor lives in a block reserve() maps apart, batches go
 * through pinned staging and to_device(), results come back with to_host(), and collectives
 * over replica tensors run through reduce_many/copy_many. It lets the CPU suite drive every
 * code path a GPU takes in the strategies (the CUDA tests need a GPU).
 */
#ifndef STRATA_TESTS_DEVSIM_H
#define STRATA_TESTS_DEVSIM_H

#include "strata/strata.h"

/** The simulated driver (the CPU's kernels; device memory reserved, staged and copied). */
const struct strata_device_ops *devsim_driver(void);

/** The same without reduce_many/copy_many: multi-device strategies must refuse it. */
const struct strata_device_ops *devsim_driver_no_comm(void);

/** Calls made on a thread that had not bound a device first (must stay 0). */
long devsim_unbound(void);

/** Bytes copied host -> device so far (batches and parameter images). */
long devsim_uploaded(void);

/** A driver and its own copy of its kernels, to change one of either in a test. */
struct driver_copy {
        struct strata_device_ops dev;
        struct strata_kernel_ops k;
};

/** Copy @p from into @p c, its kernels included; returns &c->dev. */
struct strata_device_ops *driver_copy(struct driver_copy *c, const struct strata_device_ops *from);

#endif
