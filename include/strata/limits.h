/* Compile-time limits every layer sizes its fixed tables with. */
#ifndef STRATA_LIMITS_H
#define STRATA_LIMITS_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Most devices one runtime, worker pool or communicator drives. Per-device tables (worker
 * slots, communicator descriptors, reservations) are arrays of this size, so raising it raises
 * their planned bytes; the sizes that interlock with it are checked with _Static_assert.
 */
#define STRATA_MAX_DEVICES 64

#ifdef __cplusplus
}
#endif

#endif /* STRATA_LIMITS_H */
