/*
 * Invariant mode's tree over a device's chunks as a stack (private to nn/chunks*.c): what the
 * chunks' sums (nn/chunks_tree.c), their plan and the loss's sums (nn/chunks.c) walk alike.
 */
#ifndef STRATA_NN_CHUNKS_STACK_H
#define STRATA_NN_CHUNKS_STACK_H

#include "nn/chunks.h"

/*
 * The tree over a device's chunks as a stack of partial sums, in chunk order: a chunk's leaf
 * is pushed, and the top two merge while they are siblings (equal size, the left one aligned
 * to twice it). What is left are the range's blocks, in order.
 */
struct stack {
        int size[2 * STRATA__BLOCKS_MAX], at[2 * STRATA__BLOCKS_MAX];
        int top, depth; /* entries now, and most at once */
};

static inline void push(struct stack *s, int chunk)
{
        s->at[s->top] = chunk;
        s->size[s->top++] = 1;
        s->depth = s->top > s->depth ? s->top : s->depth;
}

/* The top two entries are siblings: the caller adds the top into the one below, then pop(). */
static inline int siblings(const struct stack *s)
{
        int t = s->top;

        return t > 1 && s->size[t - 1] == s->size[t - 2] &&
               s->at[t - 2] % (2 * s->size[t - 2]) == 0;
}

/* The top merged into the entry below it, their parent. */
static inline void pop(struct stack *s)
{
        s->size[s->top - 2] *= 2;
        s->top--;
}

#endif /* STRATA_NN_CHUNKS_STACK_H */
