/*
 * What the files of rl/ share (private): the header every object's block starts with, the
 * digest of a configuration that guards a restore, and the layout walk that gives a block's
 * size and its arrays' offsets from one description, so the size strata_rl_*_bytes() reports
 * is the one init carves.
 */
#ifndef STRATA_RL_RL_H
#define STRATA_RL_RL_H

#include <stddef.h>
#include <stdint.h>

#include "strata/arena.h"

/* The first bytes of every block: what it is, and the digest of the configuration it was
 * laid out for. */
struct strata__rl_head {
        uint64_t magic;
        uint64_t digest;
};

/* A layout walk: each strata__rl_take() reserves @p n elements of @p size bytes, aligned to
 * 64 bytes, and returns their offset; an overflow sticks and fails the walk's end. */
struct strata__rl_walk {
        size_t off;
        int overflow;
};

size_t strata__rl_take(struct strata__rl_walk *w, size_t n, size_t size);

/* FNV-1a over @p n 64-bit words: a configuration's digest, field by field (no padding). */
uint64_t strata__rl_digest(const uint64_t *words, size_t n);

/* Carve @p bytes from @p arena (64-byte aligned), zero them and write the header. */
int strata__rl_carve(struct strata_arena *arena, size_t bytes, uint64_t magic, uint64_t digest,
                     void **block);

/* STRATA_OK when every one of @p n values is finite, else STRATA_ENONFINITE naming @p what,
 * the index and the value. */
int strata__rl_finite(const float *x, size_t n, const char *what);

/* PPO under mpi (rl/rollout.c, decision 0094): in a finished rollout, every row of the
 * environments outside [@p lo, @p hi) set to -0 (x + -0 is x, +0 and -0 included), and the
 * rows' arrays (states to returns, one run of floats, padding zero) in *@p rows, *@p count
 * floats: summed across the processes, each holding its own environments', every process
 * then holds every environment's rows. */
int strata__rollout_keep_envs(struct strata_rl_rollout *ro, uint32_t lo, uint32_t hi,
                              float **rows, size_t *count);

/* Uniform replay sampling in @p groups (rl/replay.c, decision 0079): row j of the batch draws
 * only among the environments of its group, both split as the runtime splits a batch over its
 * devices; 1 group is strata_rl_replay_sample(). Only rows [@p lo, @p hi) are written (an mpi
 * process's own, decision 0101; [0, batch) with 1 group): a row's draw does not depend on the
 * others, so those rows hold what they would with every row written. */
int strata__replay_sample_groups(struct strata_rl_replay *rb, uint32_t batch, uint32_t groups,
                                 uint32_t lo, uint32_t hi, const struct strata_rl_sample *out);

/* strata_rl_noise_add() of environments [@p from, @p to) with their values not needed
 * (rl/stats.c, decision 0101): each draw is counted, so the next one is the same as after an
 * add; Gaussian noise computes nothing, Ornstein-Uhlenbeck's state moves as it would. */
int strata__noise_skip(struct strata_rl_noise *nn, uint32_t from, uint32_t to);

#endif /* STRATA_RL_RL_H */
