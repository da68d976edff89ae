/*
 * Collectives over the blocks of a vector (internal to the library; docs/decisions/0045): one
 * call for a span that several ranks' blocks share, where the sharded strategies issued one
 * reduce or broadcast per block; and the checked forms of a reduce-scatter over blocks and of
 * a whole vector's all-reduce, which note whether a sum stored was not finite (0104, 0110).
 * The span is elements [lo, lo + count) of a vector cut in blocks of @p block elements, block
 * g owned by global rank g; rank g's piece is its block's part of the span (possibly empty).
 * drivers/comm_internal.h has the details.
 */
#ifndef STRATA_DRIVERS_COMM_BLOCKS_H
#define STRATA_DRIVERS_COMM_BLOCKS_H

#include <stddef.h>

#include "strata/comm.h"

/*
 * Every rank's @p send (count elements, the span) summed; global rank g's piece of the sum into
 * its @p recv (in place: recv == send + the piece's offset in the span). Every element is summed
 * in the world's order (strata_comm_reduce's), so the bits are those of one reduce per piece.
 * @retval as strata_comm_run(); STRATA_EINVAL also for block 0 or a span past the world's blocks.
 */
int strata__comm_reduce_scatter_blocks(struct strata_comm *c, int rank, const void *send,
                                       void *recv, size_t count, size_t lo, size_t block,
                                       enum strata_dtype dt, enum strata_reduce_op op);

/*
 * strata__comm_reduce_scatter_blocks() of f32 in place (@p g: the span; @p recv as there), the
 * sums' check in their pass (decision 0104): each rank records whether a sum it stored, in
 * whichever rank's piece, is NaN or infinite, and adds @p count to its checked span (every
 * rank's stores together cover the span, so the ranks' flags ORed are the span's check). A
 * call the transport could not check (device memory, a transport without it, a failure)
 * marks the rank's record missed.
 */
int strata__comm_reduce_scatter_checked(struct strata_comm *c, int rank, void *g, void *recv,
                                        size_t count, size_t lo, size_t block,
                                        enum strata_reduce_op op);

/*
 * strata_comm_all_reduce() of f32 in place, its sums checked in their pass where the
 * transport can (decision 0110: the net transport's direct reduction with one local rank,
 * where every process stores every sum), @p count added to the rank's checked span; a call it
 * could not check marks the record missed, as above.
 */
int strata__comm_all_reduce_checked(struct strata_comm *c, int rank, float *g, size_t count,
                                    enum strata_reduce_op op);

/*
 * Local rank @p rank's record of checked collectives since the last call, then cleared:
 * returns 1 when a sum it stored was not finite; *span: the elements of the spans checked
 * (0 when one went unchecked, or for a bad @p c or @p rank, which return 0).
 */
int strata__comm_checked(struct strata_comm *c, int rank, size_t *span);

/*
 * Every rank's piece (@p send, its block's part of the span) into every rank's @p recv (count
 * elements, the span; in place: send == recv + the piece's offset).
 */
int strata__comm_all_gather_blocks(struct strata_comm *c, int rank, const void *send,
                                   void *recv, size_t count, size_t lo, size_t block,
                                   enum strata_dtype dt);

#endif /* STRATA_DRIVERS_COMM_BLOCKS_H */
