/*
 * Failure injection, for tests only: not part of strata.h. A test includes this header to
 * make a chosen device or rank fail at a chosen point and check that every other one is
 * released and the error comes back.
 */
#ifndef STRATA_BASE_TESTING_H
#define STRATA_BASE_TESTING_H

/* Forward declarations only: this header sits in the base layer, usable from every layer
 * that defines an injection point. */
struct strata_runtime;
struct strata_comm;

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Device @p device fails with @p status when it handles lifecycle @p event
 *        (enum strata__event); device -1 disables.
 * @retval STRATA_OK, STRATA_EINVAL (out of range, or a status that is not an error).
 */
int strata__inject_failure(struct strata_runtime *rt, int device, int event, int status);

/**
 * @brief Device @p device's gradients count as not finite at the next loss-scaled (16-mixed)
 *        optimizer step, once: every device must then skip the step together.
 * @retval STRATA_OK, STRATA_EINVAL (not a live runtime, or no such device).
 */
int strata__inject_nonfinite_grad(struct strata_runtime *rt, int device);

/**
 * @brief Make @p rank fail with @p status when it reaches step @p point (0-based) of the next
 *        collectives; rank -1 disables. Points: 0 after the arguments are published, 1 after
 *        the ranks agreed, 2 after the data moved.
 */
void strata__comm_inject(struct strata_comm *c, int rank, int point, int status);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_BASE_TESTING_H */
