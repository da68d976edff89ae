/*
 * A simulated device whose memory the runtime must treat as not host-visible: the CPU
 * driver's math, but every replica tensor lives in a block reserve() maps apart, batches go
 * through pinned staging and to_device(), results come back with to_host(), and collectives
 * over replica tensors run through reduce_many/copy_many. It lets the CPU suite drive every
 * code path a GPU takes in the strategies (the CUDA tests need a GPU).
 */
#ifndef STRATA_TESTS_DEVSIM_H
#define STRATA_TESTS_DEVSIM_H

#include "strata/strata.h"

/** The simulated driver (the CPU ops with host_visible = 0 and device-memory hooks). */
const struct strata_device_ops *devsim_driver(void);

/** The same without reduce_many/copy_many: multi-device strategies must refuse it. */
const struct strata_device_ops *devsim_driver_no_comm(void);

/** Calls made on a thread that had not bound a device first (must stay 0). */
long devsim_unbound(void);

/** Bytes copied host -> device so far (batches and parameter images). */
long devsim_uploaded(void);

#endif
