/*
 * Arrays of floats from an arena, their byte count checked (internal): the flat vectors,
 * activations and scratch the nn layer carves.
 */
#ifndef STRATA_ALLOC_FLOATS_H
#define STRATA_ALLOC_FLOATS_H

#include <stddef.h>

#include "strata/arena.h"

/**
 * @p n floats from @p a at its default alignment into *out (NULL from a planning arena);
 * STRATA_EOVERFLOW when n floats overflow a size, else strata_arena_alloc()'s status.
 */
int strata__arena_floats(struct strata_arena *a, size_t n, float **out);

#endif /* STRATA_ALLOC_FLOATS_H */
