/*
 * The replica's own struct, private to nn/: the files of nn/ that lay out and run a replica
 * include it; strategies, checkpoints and the fingerprint see the view and the functions of
 * nn/replica.h alone (tests may read it).
 */
#ifndef STRATA_NN_REPLICA_PRIVATE_H
#define STRATA_NN_REPLICA_PRIVATE_H

#include <stddef.h>

#include "nn/replica.h"

/* struct strata__replica from: a module that reads no earlier output (nor branches off one). */
#define STRATA__NO_SOURCE (-32768)

/*
 * A model's several inputs and outputs (struct strata_model inputs, outputs) on one replica:
 * where each input's values lie in a row and the buffer its rows are split into, and each
 * output's module, loss, weight, targets and loss gradient. nin and nout 0: the model gives
 * none (one input, the last module's output with the model's loss): nothing here is used.
 * With several outputs a label output's class index is one float of the targets row, made an
 * int32 label as the rows load (lab_host, then the device's view in tout).
 */
struct strata__replica_io {
        int nin, nout;
        int in_off[STRATA_MAX_INPUTS], in_w[STRATA_MAX_INPUTS];
        float *xin[STRATA_MAX_INPUTS];     /* input k's rows of this batch (nin > 1) */
        int mod[STRATA_MAX_OUTPUTS];       /* output k's module */
        int w[STRATA_MAX_OUTPUTS], toff[STRATA_MAX_OUTPUTS]; /* its width, place in targets */
        int ooff[STRATA_MAX_OUTPUTS];      /* its place in a row of predictions */
        int tw[STRATA_MAX_OUTPUTS];        /* its values in a row of targets (label: 1) */
        int tdim;                          /* a row of targets: the tw's sum (nout > 1) */
        int fwidth;                        /* the float outputs' widths' sum */
        unsigned char label[STRATA_MAX_OUTPUTS]; /* its loss takes labels */
        int32_t *lab_host[STRATA_MAX_OUTPUTS];   /* a label output's labels, host (nout > 1) */
        float weight[STRATA_MAX_OUTPUTS];
        const struct strata_loss_ops *loss[STRATA_MAX_OUTPUTS];
        float *gout[STRATA_MAX_OUTPUTS];   /* its loss gradient (the last module's: dbuf[0]) */
        float *tout[STRATA_MAX_OUTPUTS];   /* its targets split from the row (nout > 1; a
                                            * label output's int32 labels, device memory) */
        const void *t[STRATA_MAX_OUTPUTS]; /* its targets of this batch */
};

struct strata__replica {
        struct strata__replica_view v; /* first: what strategies see (nn/replica.h) */
        const struct strata_device_ops *drv;
        const struct strata_loss_ops *loss; /* the model's */
        float **y;                 /* output of each layer, stored as ytype says */
        enum strata_dtype *ytype;  /* f32, or bf16 between two bf16_io modules (bf16-mixed) */
        short *from;               /* each merge or branch module's source (-1 - k: input
                                    * k), else STRATA__NO_SOURCE; NULL: the model has none */
        float **gskip;             /* a skip source's output gradient from its readers, else
                                    * NULL: added to its gradient before its backward */
        short *fuse_last;          /* a row_loop module: the last module its loop over rows
                                    * runs (itself when none); NULL: no module is fused */
        short *fuse_head;          /* a module run inside another's loop: that one, else -1 */
        float *fuse_dx[2];         /* one row's gradients between the fused modules */
        float *dbuf[2];            /* ping-pong activation gradients */
        float *x_stage;            /* batch_to_device: the batch in device memory */
        void *y_stage;             /* its targets: int32 labels, or f32 [rows, out] */
        float *x_host;             /* host staging of the same (== x_stage without staging) */
        void *y_host;
        float *p_host;             /* staged devices: host image of parameters then state */
        size_t nstate;             /* floats of running state over all layers */
        const float *x;            /* current input (staging or caller's, read-only) */
        const void *targets;       /* current labels or float targets (device memory) */
        struct strata__replica_io io; /* several inputs and outputs */
        double loss_sum;           /* summed loss of the current batch */
        double out_loss[STRATA_MAX_OUTPUTS]; /* several outputs: each one's, unweighted */
        int out_correct[STRATA_MAX_OUTPUTS]; /* each label output's rows predicted right */
        int correct;               /* labels: rows predicted right (the first label output's) */
        int float_row;             /* targets are a row of floats (strata__float_row()) */
        double sse, sae;           /* float targets: summed squared and absolute errors */
        uint64_t opt_t;            /* optimizer steps taken */
        enum strata_dtype compute; /* GEMM operand type (the precision plugin's) */
        void *lp_scratch;          /* mixed precision: the GEMM scratch (NULL in fp32) */
        size_t lp_elems, lp_dim;   /* what it was sized for */
        void *scratch;             /* the driver's scratch for this device (plan.c), or NULL */
        struct strata_arena arena;
};

_Static_assert(offsetof(struct strata__replica, v) == 0,
               "strata__replica_view() casts a replica to its view");

#endif /* STRATA_NN_REPLICA_PRIVATE_H */
