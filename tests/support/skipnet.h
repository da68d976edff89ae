/*
 * Graph models with skip connections on synthetic 1 x 6 x 6 samples (4 classes, 256 samples,
 * batch 16), trained through the public API: a ResNet of two residual blocks and a small
 * U-Net. Shared by the strategy tests of skip connections.
 */
#ifndef STRATA_TESTS_SKIPNET_H
#define STRATA_TESTS_SKIPNET_H

#include "strata/strata.h"

#define SKIPNET_HW 6
#define SKIPNET_IN (SKIPNET_HW * SKIPNET_HW)
#define SKIPNET_CLASSES 4
#define SKIPNET_BATCH 16
#define SKIPNET_SAMPLES 256
#define SKIPNET_STEPS_MAX 64
#define SKIPNET_NP_MAX 2048

enum skipnet_kind {
        /*
         * conv2d(4,3,padding=1) relu, then two blocks of conv relu conv add(from) relu (the
         * second block's skip reads the first's output), flatten, linear(4)
         */
        SKIPNET_RESNET,
        /*
         * conv2d(4,3,padding=1) relu maxpool2d(2) conv2d(8,3,padding=1) relu upsample(2)
         * concat(from=1) conv2d(4,3,padding=1) relu flatten linear(4)
         */
        SKIPNET_UNET,
        /*
         * conv2d(4,3,padding=1) relu maxpool2d(2) conv2d(8,3,padding=1) relu maxpool2d(2)
         * flatten linear(4): no skip connection, a LeNet-style chain (the convolutions run
         * the ReLU and pooling after them in their loops over samples)
         */
        SKIPNET_CNN,
};

/** The model of @p kind (a static description) and its parameter count. */
const struct strata_model *skipnet_model(enum skipnet_kind kind, size_t *np);

/** @p kind on @p devices devices of strategy @p s (single: 1), seed 5, fp32, SGD. */
struct strata_config skipnet_cfg(enum skipnet_kind kind, enum strata_strategy_kind s,
                                 int devices);

/** What a run gave: its step losses and its parameters (fsdp's shards put together). */
struct skipnet_run {
        double loss[SKIPNET_STEPS_MAX];
        float p[SKIPNET_NP_MAX];
        size_t np;
        long heap_calls;  /**< during the steps (-1: not counted in this build) */
};

/**
 * Train @p c for @p steps steps through the data in a fixed order, with an evaluation and a
 * prediction after each step, counting heap calls during them; asserts planned == used and
 * tears down.
 */
void skipnet_train(const struct strata_config *c, int steps, struct skipnet_run *out);

/** The same on an open runtime, steps [from, to) of the order; no teardown, no checks. */
void skipnet_steps(struct strata_runtime *rt, int from, int to, struct skipnet_run *out);

/** @p rt's parameters (fsdp's shards put together) into @p out. */
void skipnet_params(struct strata_runtime *rt, const struct strata_config *c,
                    struct skipnet_run *out);

#endif
