/*
 * A replica: one device's copy of the model with its gradients, optimizer state, activations
 * and staging, all carved from that device's arena. Strategies drive replicas; the same layout
 * code runs against a planning arena to size them (internal).
 */
#ifndef STRATA_NN_REPLICA_H
#define STRATA_NN_REPLICA_H

#include "strata/arena.h"
#include "strata/nn.h"
#include "strata/runtime.h"

struct strata__replica {
        int dev;
        int nlayers;
        int rows_max;              /* rows of activations planned */
        int width_max;             /* widest activation */
        struct strata_layer *layers;
        float **y;                 /* output of each layer */
        float *params, *grads, *opt_state;
        size_t nparam, nopt;
        float *dbuf[2];            /* ping-pong activation gradients */
        float *x_stage;            /* batch_to_device staging */
        int32_t *y_stage;
        const float *x;            /* current input (staging or caller's, read-only) */
        const int32_t *labels;
        int rows;                  /* rows of the current batch */
        double loss;               /* summed loss of the current batch */
        int correct;
        uint64_t opt_t;            /* optimizer steps taken */
        struct strata_arena arena;
};

/** Carve a replica for @p model from @p a (a planning arena only counts). */
int strata__replica_layout(struct strata__replica *r, struct strata_arena *a,
                           const struct strata_model *model, const struct strata_optim *o,
                           int rows_max, int dev);

/** Initialise parameters and state deterministically from @p seed; zero optimizer state. */
void strata__replica_init(struct strata__replica *r, uint64_t seed);

/** Forward through every module; returns the logits (rows x classes). */
const float *strata__replica_forward(struct strata__replica *r, const struct strata_step_ctx *c);

/** Loss (summed into r->loss) and, when @p grad, dlogits scaled by 1/rows_global. */
void strata__replica_loss(struct strata__replica *r, const struct strata_step_ctx *c, int grad);

/** Backward through every module from the loss gradient. */
void strata__replica_backward(struct strata__replica *r, const struct strata_step_ctx *c);

/** Optimizer update of the flat parameters; marks gradients fresh for the next backward. */
void strata__replica_step(struct strata__replica *r, const struct strata_optim *o);

#endif /* STRATA_NN_REPLICA_H */
