/* A small model on synthetic data, shared by the runtime and strategy tests. */
#ifndef STRATA_TESTS_RIG_H
#define STRATA_TESTS_RIG_H

#include "strata/strata.h"

#define RIG_IN 20
#define RIG_CLASSES 4
#define RIG_BATCH 16
#define RIG_OUT 3 /* the regression rig's outputs */

struct rig {
        struct strata_module mods[6];
        struct strata_model model;
        struct strata_config cfg;
        struct strata_dataset ds;
        struct strata_loader loader;
        struct strata_arena data;
        uint32_t idx[256];
};

/** Model 20-16(bn?)-relu-4, synthetic data of 256 samples, batch 16, single strategy. */
void rig_init(struct rig *r, int bn);
/**
 * The regression rig: model 20-16-relu-3 with @p loss on a synthetic float data set of 256
 * rows (strata_dataset_synthetic_regression), batch 16, single strategy.
 */
void rig_init_regression(struct rig *r, const struct strata_loss_ops *loss);

/* Two models of one runtime on the regression rig: model 0 the rig's (@p loss), model 1
 * 20-8-tanh-3 (MSE, AdamW), the set in r.cfg.models (decision 0097's tests). */
struct rig_two {
        struct rig r;
        struct strata_module mods1[3];
        struct strata_model m1;
        struct strata_optim o1;
        struct strata_models set;
};
void rig_two_init(struct rig_two *t, const struct strata_loss_ops *loss);

/* The loader's first batch, copied into the rig's own arrays; the last row's first target
 * @p v where @p v is not 0 (in the last device's rows). */
struct strata_batch rig_first_batch(struct rig *r, float v);
/** The conv rig's input: one channel of RIG_CONV_HW x RIG_CONV_HW. */
#define RIG_CONV_HW 6
/**
 * The conv rig: Conv2d(1, 4, 3, padding 1, circular)-relu-linear(4) on synthetic samples
 * of 1 x 6 x 6 (the model's in_dims), 256 of them, batch 16, single strategy.
 */
void rig_init_conv(struct rig *r);
/**
 * Assert that planning @p r's configuration is refused with @p status and a message
 * containing @p needle; @p what names the case in a failure.
 */
void rig_plan_refused(const struct rig *r, int status, const char *what, const char *needle);
/** The rig with linear-bn-relu-dropout(0.25)-linear: every kind of device op on the path. */
void rig_init_full(struct rig *r);
/** A runtime of configuration @p c, initialised and connected (asserted). */
struct strata_runtime *rig_open(const struct strata_config *c);
/** Run @p steps training steps on @p rt, cycling through the data; *last gets the last batch. */
void rig_steps(struct rig *r, struct strata_runtime *rt, int steps, struct strata_batch *last);
/** Train @p steps steps on a fresh runtime; copies the final parameters into @p out. */
void rig_train(struct rig *r, int steps, float *out, size_t n);


/** Train @p steps on a configuration (strategy/devices already set); copy parameters out. */
void rig_train_cfg(struct rig *r, const struct strata_config *cfg, int steps, float *out,
                   size_t n);
/**
 * The rig's configuration on @p devices devices of strategy @p kind, with SyncBatchNorm when
 * @p sync_bn (dp then gets the replication callbacks SyncBatchNorm needs).
 */
struct strata_config rig_cfg(const struct rig *r, enum strata_strategy_kind kind, int devices,
                             int sync_bn);
/**
 * Train @p r's configuration, then @p kind on 1..@p max_devices devices twice each: runs
 * repeat bitwise, one device is bitwise the single run, more are within 1e-5 of it.
 * @p np parameters (at most 4096).
 */
void rig_equivalence(struct rig *r, enum strata_strategy_kind kind, int max_devices, size_t np,
                     int steps);
/** Largest |a - b| / (1 + |b|). */
double rig_rel_diff(const float *a, const float *b, size_t n);

/**
 * strata-train's default model (784-256-128-10, ReLUs between) with AdamW, batch 128, under
 * @p kind on @p devices: for plans only (no data).
 */
struct strata_config rig_default_mlp(enum strata_strategy_kind kind, int devices);

/**
 * Run tests/tools/load_safetensors.py on export @p st (the full rig's model) with @p rows
 * f32 input rows @p x and the outputs @p out Strata predicted for them (written beside @p st);
 * asserts that PyTorch predicts the same, logging its report.
 */
void rig_pytorch_matches(const char *st, const float *x, const float *out, int rows);

/**
 * The same with tests/tools/@p script (same arguments and "match" line as
 * load_safetensors.py): @p rows rows of @p in inputs and @p outputs outputs.
 */
void rig_pytorch_script(const char *script, const char *st, const float *x, int in,
                        const float *out, int outputs, int rows);

/*
 * An epoch of the model @p setup makes, trained, evaluated and predicted under @p kind on @p n
 * devices, precision @p prec, invariant mode or not: no heap call in the process during the
 * steps, and the memory used is the plan's to the byte.
 */
void rig_no_heap(void (*setup)(struct rig *), enum strata_strategy_kind kind, int n,
                 enum strata_precision prec, int invariant);

#endif
