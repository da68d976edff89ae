/*
 * LayerNorm(C) over each position of a (C, P) sample (nn/norm_tokens.c): what the replica's
 * pass runs for `tokens layernorm(dims=1) tokens`, the same bits without the two transposes
 * (internal; decision 0090).
 */
#ifndef STRATA_NN_NORM_TOKENS_H
#define STRATA_NN_NORM_TOKENS_H

#include "strata/nn.h"

/** The widest C run this way (the parameter gradients' sums sit on the stack). */
#define STRATA__LN_TOKENS_MAX 64

/**
 * Whether layer @p ln is a LayerNorm(dims=1) whose groups are the @p channels features of a
 * token that `tokens` made of a (channels, P) sample, at most STRATA__LN_TOKENS_MAX wide.
 */
int strata__ln_tokens_fits(const struct strata_layer *ln, int channels);

/**
 * LayerNorm @p ln's forward over @p rows (channels, P) samples @p x into @p y, in that layout:
 * the values `tokens`, @p ln's forward and `tokens` give; its aux as @p ln's forward leaves it.
 */
void strata__ln_tokens_forward(struct strata_layer *ln, const float *x, float *y, int rows,
                               int channels);

/**
 * LayerNorm @p ln's backward in the (channels, P) layout, after strata__ln_tokens_forward()
 * on @p x: the parameter gradients written or added (grad_fresh) and the input gradient
 * @p dx, the values of the three modules' backwards.
 */
void strata__ln_tokens_backward(struct strata_layer *ln, const float *x, const float *dy,
                                float *dx, int rows, int channels);

#endif /* STRATA_NN_NORM_TOKENS_H */
