/*
 * A model with two inputs and two outputs (TorchFort's multi-argument training) on synthetic
 * float data, trained through the public API: input 0 (6 values) and input 1 (3 values) each
 * through their own layers, concatenated, a residual add over input 0, then a regression head
 * (MSE, weight 0.7) and a second head off the same trunk (BCE with logits, weight 1.5).
 */
#ifndef STRATA_TESTS_MULTINET_H
#define STRATA_TESTS_MULTINET_H

#include "strata/strata.h"

#define MULTINET_IN0 6
#define MULTINET_IN1 3
#define MULTINET_IN (MULTINET_IN0 + MULTINET_IN1)
#define MULTINET_OUT0 3               /* module 8's, MSE */
#define MULTINET_OUT1 2               /* module 9's, BCE with logits */
#define MULTINET_T (MULTINET_OUT0 + MULTINET_OUT1)
#define MULTINET_W0 0.7f
#define MULTINET_W1 1.5f
#define MULTINET_BATCH 16
#define MULTINET_ROWS 128
#define MULTINET_STEPS_MAX 32
#define MULTINET_NP 146
#define MULTINET_MODULES 10

/*
 * The same graph with a classification head: output 1 is linear(4) under cross-entropy
 * (weight 1.5) whose target is one float of the row, its class index.
 */
#define MULTINET_CE_CLASSES 4
#define MULTINET_CE_T (MULTINET_OUT0 + 1)                   /* a row of targets */
#define MULTINET_CE_OUT (MULTINET_OUT0 + MULTINET_CE_CLASSES) /* a row of predictions */
#define MULTINET_CE_NP (MULTINET_NP + 6 * (MULTINET_CE_CLASSES - MULTINET_OUT1) + \
                        (MULTINET_CE_CLASSES - MULTINET_OUT1))
#define MULTINET_NP_MAX MULTINET_CE_NP

/**
 * The model: linear(5) tanh [input 0]; linear(4, from input 1) sigmoid; concat(from=1);
 * linear(6) tanh add(from=input 0); linear(3) [output 0]; linear(2, from=7) [output 1].
 */
extern const struct strata_model multinet_model;

/** The graph with the cross-entropy head (module 9: linear(4)). */
extern const struct strata_model multinet_ce_model;

/** Its line for strata_model_parse(). */
#define MULTINET_CE_LINE                                                                    \
        "input(6) input(3) linear(5) tanh linear(4,from=input1) sigmoid concat(from=1) "   \
        "linear(6) tanh add(from=input) linear(3) output(mse,weight=0.7) "                 \
        "linear(4,from=7) output(ce,weight=1.5)"

/** Its targets of row @p i (MULTINET_CE_T: the MSE head's, then the class index). */
const float *multinet_ce_t(int i);

/** Its batch of @p rows rows from row @p first. */
struct strata_batch multinet_ce_batch(int first, int rows);

/** The model (multinet_model or multinet_ce_model) of @p c, and its parameters. */
int multinet_np(const struct strata_model *m);

/** Its line for strata_model_parse(). */
#define MULTINET_LINE                                                                       \
        "input(6) input(3) linear(5) tanh linear(4,from=input1) sigmoid concat(from=1) "   \
        "linear(6) tanh add(from=input) linear(3) output(mse,weight=0.7) "                 \
        "linear(2,from=7) output(bce,weight=1.5)"

/** Row @p i's inputs (MULTINET_IN) and targets (MULTINET_T, the BCE ones in [0, 1]). */
const float *multinet_x(int i);
const float *multinet_t(int i);

/** The batch of @p rows rows from row @p first. */
struct strata_batch multinet_batch(int first, int rows);

/**
 * The model on @p devices devices of strategy @p s (single: 1), seed 9, fp32, SGD; set c.model
 * and c.classes (MULTINET_CE_OUT) for the cross-entropy head, which multinet_train() and
 * multinet_steps() then feed its batches.
 */
struct strata_config multinet_cfg(enum strata_strategy_kind s, int devices);

/** What a run gave: its step losses and its parameters (fsdp's shards put together). */
struct multinet_run {
        double loss[MULTINET_STEPS_MAX];
        /** each output's own loss: the training steps' [s][k], the evaluations' [s][2 + k] */
        double own[MULTINET_STEPS_MAX][4];
        /** each output's rows predicted right: the training steps' [s][k], evaluations' [2 + k] */
        int correct[MULTINET_STEPS_MAX][4];
        int model_correct[MULTINET_STEPS_MAX]; /**< the training steps' strata_metrics correct */
        float p[MULTINET_NP_MAX];
        long heap_calls; /**< during the steps (-1: not counted in this build) */
};

/**
 * Train @p c for @p steps steps over the rows in order, with an evaluation and a prediction
 * after each, counting heap calls during them; asserts planned == used and tears down.
 */
void multinet_train(const struct strata_config *c, int steps, struct multinet_run *out);

/** The same on an open runtime, steps [from, to) of the order; no teardown, no checks. */
void multinet_steps(struct strata_runtime *rt, int from, int to, struct multinet_run *out);

/** multinet_steps() for @p m's batches (multinet_model or multinet_ce_model). */
void multinet_steps_of(const struct strata_model *m, struct strata_runtime *rt, int from,
                       int to, struct multinet_run *out);

/** @p rt's parameters (fsdp's shards put together) into @p out. */
void multinet_params(struct strata_runtime *rt, const struct strata_config *c,
                     struct multinet_run *out);

#endif
