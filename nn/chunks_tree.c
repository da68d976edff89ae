/*
 * Invariant mode's pairwise tree over one device's chunks (nn/chunks.h): each chunk's share
 * of a sum written by a leaf, the partial sums added in the tree's order in the chunks'
 * scratch (or, for the device's one block, in the sum's own place), every addition the
 * device's add kernel, the communicator's sum of two. Below nn/chunks.c's passes and
 * nn/chunks_wgrad.c's weight gradients, which both sum through it. Decisions 0029 and 0087.
 */
#include "strata/device.h"
#include "nn/chunks.h"
#include "nn/chunks_stack.h"

void strata__chunks_sum(const struct strata_step_ctx *c, size_t n, strata__chunk_fn leaf,
                        void *arg, int pairs, float *root, float **sum)
{
        const struct strata_chunks *ch = c->chunks;
        struct stack s = { .top = 0 };
        float *at0 = root ? root : ch->tree; /* entry t at at0 (t = 0) or tree + t n */

        for (int j = 0; j < ch->n; j++) {
                int rows = ch->lo[j + 1] - ch->lo[j], t = s.top;

                if (pairs && t > 0 && s.size[t - 1] == 1 && s.at[t - 1] % 2 == 0) {
                        /* the right sibling of the leaf on top: onto it */
                        leaf(arg, ch->lo[j], rows, t > 1 ? ch->tree + (size_t)(t - 1) * n : at0,
                             1);
                        s.size[t - 1] = 2;
                } else {
                        leaf(arg, ch->lo[j], rows, t ? ch->tree + (size_t)t * n : at0, 0);
                        push(&s, ch->c0 + j);
                }
                for (; siblings(&s); pop(&s))
                        ch->k->add(s.top > 2 ? ch->tree + (size_t)(s.top - 2) * n : at0,
                                   ch->tree + (size_t)(s.top - 1) * n, n);
        }
        *sum = at0; /* the device's blocks, one after the other */
}
