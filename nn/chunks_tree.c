/*
 * Invariant mode's pairwise tree over one device's chunks (nn/chunks.h): each chunk's share
 * of a sum written by a leaf, the partial sums added in the tree's order in the chunks'
 * scratch (or, for the device's one block, in the sum's own place), every addition the
 * device's add kernel, the communicator's sum of two. Below nn/chunks.c's passes and
 * nn/chunks_wgrad.c's weight gradients, which both sum through it; the same walk as a
 * program for the kernels' chunk-tree GEMM (gemm_tree()). Decisions 0029, 0087 and 0095.
 */
#include "strata/device.h"
#include "nn/chunks.h"
#include "nn/chunks_stack.h"

int strata__chunks_program(const struct strata_chunks *ch, int pairs, unsigned char *op)
{
        struct stack s = { .top = 0 };

        for (int j = 0; j < ch->n; j++) {
                int t = s.top;

                if (pairs && t > 0 && s.size[t - 1] == 1 && s.at[t - 1] % 2 == 0) {
                        /* the right sibling of the leaf on top: onto it */
                        s.size[t - 1] = 2;
                        op[j] = STRATA_TREE_ONTO;
                } else {
                        push(&s, ch->c0 + j);
                        op[j] = 0;
                }
                for (; siblings(&s); pop(&s))
                        op[j] = (unsigned char)(op[j] + 2);
        }
        return s.top;
}

void strata__chunks_sum(const struct strata_step_ctx *c, size_t n, strata__chunk_fn leaf,
                        void *arg, int pairs, float *root, float **sum)
{
        const struct strata_chunks *ch = c->chunks;
        unsigned char op[STRATA__CHUNKS_MAX];
        float *at0 = root ? root : ch->tree; /* entry t at at0 (t = 0) or tree + t n */
        int top = 0;

        strata__chunks_program(ch, pairs, op);
        for (int j = 0; j < ch->n; j++) {
                int rows = ch->lo[j + 1] - ch->lo[j];

                if (op[j] & STRATA_TREE_ONTO)
                        leaf(arg, ch->lo[j], rows, top > 1 ? ch->tree + (size_t)(top - 1) * n : at0,
                             1);
                else
                        leaf(arg, ch->lo[j], rows, top ? ch->tree + (size_t)top * n : at0, 0);
                top += !(op[j] & STRATA_TREE_ONTO);
                for (int a = op[j] >> 1; a > 0; a--, top--) /* the top into the one below */
                        ch->k->add(top > 2 ? ch->tree + (size_t)(top - 2) * n : at0,
                                   ch->tree + (size_t)(top - 1) * n, n);
        }
        *sum = at0; /* the device's blocks, one after the other */
}
