/*
 * A replica's shard: which part of the flat parameter vector one device owns where a strategy
 * shards it (zero1, zero2, fsdp), what of the parameters and gradients the replica then holds,
 * and the buffers the strategy's collectives move them through: fsdp's layer buffer and its
 * layers' gradients, zero2's layer gradients, the gradients staged in the all-reduce's type
 * (internal), and the strategy's hooks the replica calls up into (struct
 * strata__replica_hooks, given once at connect). The replica points to its shard and calls
 * into it; the shard never calls the replica (the fetch is the strategy's, given the replica
 * back).
 */
#ifndef STRATA_NN_SHARD_H
#define STRATA_NN_SHARD_H

#include <stddef.h>

#include "strata/arena.h"
#include "strata/device.h"

struct strata__replica;

/**
 * Called after layer @p layer's gradients are complete during backward (layers run last to
 * first), or before a layer computes (fsdp's gather); a non-OK status stops the pass. A module
 * fused into a convolution's loop over samples (decision 0046) gets its call, in order, before
 * its backward has run: its backward runs row by row inside its head's, which comes later. It
 * has no parameters, so there is nothing of it to reduce; a hook must not count on its
 * backward, or its input's gradient, having run.
 */
typedef int (*strata__grad_ready_fn)(void *h, struct strata__replica *r, int layer);

/**
 * How a replica calls up into the strategy that runs it, given once at connect
 * (strata__replica_set_hooks(), with the handle every call gets): the layer hooks of its
 * backward and its shard's fetch. NULL members are not called.
 */
struct strata__replica_hooks {
        strata__grad_ready_fn ready;    /* after each layer's backward, the window's last */
        strata__grad_ready_fn micro;    /* the same on the window's other micro-batches */
        strata__grad_ready_fn fetch;    /* own_params: a layer into the layer buffer */
};

/** What a replica shards besides the optimizer state (strata__shard_plan()'s @p how). */
#define STRATA__SHARD_PARAMS 1u /* fsdp: the parameters and reduced gradients too */
#define STRATA__SHARD_WHOLE_GRADS 2u /* with them: layers' gradients in a whole local vector */
#define STRATA__SHARD_GRADS 4u /* zero2: the reduced gradients alone, where that is smaller */
/* every micro-batch reduced: layers' gradients to a layer buffer, added into the window's */
#define STRATA__SHARD_EACH 8u

/**
 * The sizes a shard decides, before any memory: n devices each own len elements of the flat
 * vector of nparam (the last shard clipped at nparam), the vectors padded with zeros to npad.
 * Unsharded: n 1, len nparam.
 */
struct strata__shard_sizes {
        size_t nparam;                  /* elements of the flat vector */
        size_t len;                     /* elements each shard owns */
        size_t npad;                    /* n x len */
        size_t params, grads;           /* floats of the replica's parameters and gradients */
        size_t lbuf, lgrad;             /* floats of the layer buffer, the layers' gradients */
        int n;                          /* shards */
        /*
         * fsdp (own_params): params and grads hold the shard alone (the parameters and the
         * reduced gradients); every layer computes from lbuf (the largest layer), where the
         * fetch gathers its parameters before its forward and its backward; layers' gradients
         * go to lgrad: one layer's, or a whole local vector at each layer's offset where
         * micro-batches accumulate or clipping gathers every shard. zero2 (own_grads), where
         * that is smaller than the whole vector: params whole, grads the reduced shard alone,
         * layers' gradients to lgrad (the largest layer's), reduced to the owners after each
         * layer's backward. each (accumulate_reduce each): every layer writes its
         * micro-batch's gradients to lgrad (the largest layer's, or fsdp's whole local vector),
         * the strategy reduces them there and the replica adds what it holds of them into
         * grads, the window's sum (strata__shard_accumulate()); zero2 then always holds its
         * shard alone (own_grads) from 2 devices. whole_grads (own_params): lgrad is the
         * whole local vector (STRATA__SHARD_WHOLE_GRADS), set even where npad equals lmax.
         */
        int own_params, own_grads, each, whole_grads;
};

struct strata__shard {
        struct strata__shard_sizes size;
        size_t lo;                      /* the device's first element (0 unsharded) */
        int held;                       /* the layer lbuf holds, -1 none */
        float *lbuf, *lgrad;            /* own_params, own_grads: see above, else NULL */
        void *grad_stage;               /* gradients in the all-reduce's type, when not f32 */
        /* the strategy's upcalls and their handle (strata__replica_hooks) */
        const struct strata__replica_hooks *hooks;
        void *hooks_h;
        const struct strata_kernel_ops *k;
};

/**
 * Elements each of @p shards devices owns of @p nparam: a 64-byte multiple (the
 * communicator's slice granularity; no two shards share a cache line), at least
 * nparam / shards; nparam itself when @p shards is 1.
 */
size_t strata__shard_len_for(size_t nparam, int shards);

/**
 * The sizes of the shard of @p shards over @p nparam parameters whose largest layer has
 * @p lmax, sharding what @p how says: with STRATA__SHARD_PARAMS the replica holds one shard
 * of the parameters and reduced gradients (own_params); with STRATA__SHARD_GRADS one of the
 * reduced gradients (own_grads), when a shard and a buffer of the largest layer are fewer
 * floats than the whole padded vector.
 */
int strata__shard_plan(size_t nparam, size_t lmax, int shards, unsigned how,
                       struct strata__shard_sizes *out);

/**
 * Carve the shard's buffers of sizes @p z from @p d (tensors): the layer buffer, the layers'
 * gradients and, for a @p grad_comm type other than f32, the gradients in that type, where a
 * strategy that all-reduces them in it stages them. @p k: the device's kernels.
 */
int strata__shard_layout(struct strata__shard *s, struct strata_arena *d,
                         const struct strata__shard_sizes *z, enum strata_dtype grad_comm,
                         const struct strata_kernel_ops *k);

/** This device owns shard @p rank (its global device rank); nothing when unsharded. */
void strata__shard_set(struct strata__shard *s, int rank);

/** Elements each shard owns (the flat vector's when unsharded). */
size_t strata__shard_len(const struct strata__shard *s);

/** The first element this device owns. */
size_t strata__shard_lo(const struct strata__shard *s);

/** Shards the flat vector is cut into (1: unsharded). */
int strata__shard_count(const struct strata__shard *s);

/** Every micro-batch is reduced: layers write to a buffer, added into grads after. */
int strata__shard_each(const struct strata__shard *s);

/** fsdp: layers' gradients go to a whole local vector, at each layer's offset. */
int strata__shard_whole_grads(const struct strata__shard *s);

/**
 * each: layer gradients @p layer (elements [@p off, @p off + @p n) of the flat vector,
 * reduced by the strategy where the replica holds them) into the window's sum @p grads, what
 * the replica holds of them (every element, or its shard's): copied on the window's
 * first micro-batch (@p first), added (one rounding each, the driver's add) after.
 */
void strata__shard_accumulate(const struct strata__shard *s, float *grads, const float *layer,
                              size_t off, size_t n, int first);

/** fsdp: the replica holds its shard of the parameters and reduced gradients alone. */
int strata__shard_own_params(const struct strata__shard *s);

/** zero2: the replica holds its shard of the reduced gradients alone (whole parameters). */
int strata__shard_own_grads(const struct strata__shard *s);

/** Elements of the parameter vector the replica holds: all, or with own_params its shard's. */
size_t strata__shard_owned(const struct strata__shard *s);

/**
 * Reduced gradients the replica holds: every element's, or with own_params or own_grads its
 * shard's.
 */
size_t strata__shard_grads_held(const struct strata__shard *s);

/**
 * Where the update of the device's shard starts in the replica's parameters (@p grads 0) or
 * gradients (1): the shard's first element, or 0 where the vector is the shard alone.
 */
size_t strata__shard_at(const struct strata__shard *s, int grads);

/**
 * Where element @p a of the flat vector, reduced, goes in the replica's gradients @p grads:
 * in the whole vector, or in the shard the replica holds (NULL: another device's).
 */
float *strata__shard_grad_at(const struct strata__shard *s, float *grads, size_t a);

/** fsdp: the layer buffer every layer computes from (NULL unless own_params). */
float *strata__shard_layer_buffer(const struct strata__shard *s);

/** Where layers write their gradients: a layer's, or with whole gradients every layer's. */
float *strata__shard_layer_grads(const struct strata__shard *s);

/** The gradients staged in the all-reduce's type (NULL: it is f32). */
void *strata__shard_grad_stage(const struct strata__shard *s);

/**
 * Where the layer at offset @p off of the flat vector reads its parameters (*param) and
 * writes its gradients (*grad), given the replica's vectors @p params and @p grads.
 */
void strata__shard_layer_vectors(const struct strata__shard *s, float *params, float *grads,
                                 size_t off, float **param, float **grad);

/**
 * Elements [@p off, @p off + @p n) of the flat vector (a layer's) that lie in this device's
 * shard, copied from @p layer (the layer's values) into @p shard (the shard's vector).
 */
void strata__shard_keep(const struct strata__shard *s, float *shard, const float *layer,
                        size_t off, size_t n);

/**
 * The elements [*lo, *hi) of a group of @p count at @p poff that lie in the device's shard;
 * returns where they start in the shard (the optimizer state's offset of slot 0).
 */
size_t strata__shard_part(const struct strata__shard *s, size_t poff, size_t count, size_t *lo,
                          size_t *hi);

/** The strategy's upcalls @p hooks (each called with @p h), kept by the shard. */
void strata__shard_set_hooks(struct strata__shard *s, const struct strata__replica_hooks *hooks,
                             void *h);

/**
 * The layer hook of a backward that ends the accumulation window (@p sync) or not (NULL:
 * none), called with *@p h.
 */
strata__grad_ready_fn strata__shard_ready(const struct strata__shard *s, int sync, void **h);

/** The layer buffer holds no layer (a step or a load may have changed the shards). */
void strata__shard_release(struct strata__shard *s);

/**
 * own_params: layer @p i of replica @p r (with parameters when @p nparam) gathered into the
 * layer buffer unless it holds it already; nothing without a fetch hook.
 */
int strata__shard_fetch(struct strata__shard *s, struct strata__replica *r, int i,
                        size_t nparam);

#endif /* STRATA_NN_SHARD_H */
