/*
 * strata-train's data: Fashion-MNIST's IDX files, or synthetic samples shaped by --model, in
 * one arena sized from the data set itself before anything is read (arena.c), or an HDF5 file
 * (h5data.c); then the sampler and the loaders over it.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/idx.h"
#include "tools/train/train.h"
#include "tools/widths.h"

#define REGRESSION_TEST 2000 /* --synthetic-regression's test rows */

/* The IDX files of --data: training images and labels, test images and labels. */
static void idx_paths(const struct opts *o, char p[4][PATH_BUF])
{
        snprintf(p[0], PATH_BUF, "%s/train-images-idx3-ubyte.gz", o->data);
        snprintf(p[1], PATH_BUF, "%s/train-labels-idx1-ubyte.gz", o->data);
        snprintf(p[2], PATH_BUF, "%s/t10k-images-idx3-ubyte.gz", o->data);
        snprintf(p[3], PATH_BUF, "%s/t10k-labels-idx1-ubyte.gz", o->data);
}

/* The data's bytes and samples, from the IDX headers (nothing read yet) or --synthetic. */
static int data_size(struct run *r, char p[4][PATH_BUF], size_t *samples)
{
        struct strata_idx_info ia, ib;
        struct stat st;
        size_t a, b;

        if (r->o.synthetic_regression) { /* inputs, targets, W: 4 bytes each */
                size_t in = (size_t)r->widths[0], out = (size_t)r->widths[r->nw - 1];

                *samples = (size_t)r->o.synthetic_regression + REGRESSION_TEST;
                /* + alignment */
                r->data_bytes = *samples * (in + out) * 4 + in * out * 4 + 16 * 4096;
                return 0;
        }
        if (r->o.synthetic && (r->widths[r->nw - 1] < 2 || r->widths[r->nw - 1] > 256))
                return bad("--synthetic: the model's %d outputs would be its classes; synthetic "
                           "labels are bytes, so the last width of --model must be in 2..256",
                           r->widths[r->nw - 1]);
        if (r->o.synthetic) {
                *samples = (size_t)r->o.synthetic + 10000;
                r->data_bytes = *samples * (size_t)(r->widths[0] + 64) + 4096;
                return 0;
        }
        if (stat(r->o.data, &st) == 0 && !S_ISDIR(st.st_mode))
                return bad("--data %s: is not a directory", r->o.data);
        if (access(r->o.data, X_OK) != 0) /* traversable is enough: it need not be listable */
                return bad("data directory '%s': %s", r->o.data, strerror(errno));
        if (strata_dataset_bytes(p[0], p[1], &a) || strata_dataset_bytes(p[2], p[3], &b) ||
            strata_idx_info(p[1], &ia) || strata_idx_info(p[3], &ib))
                return bad("%s", strata_last_error());
        r->data_bytes = a + b;
        *samples = (size_t)ia.dims[0] + ib.dims[0];
        return 0;
}

/*
 * A line of several outputs: each cross-entropy output's column of the synthetic targets (@p n
 * rows of r->tvals, values in about (-1.1, 1.1)) made a class index, its value's band of
 * (-1, 1) cut into as many bands as classes.
 */
static void class_columns(const struct run *r, float *t, uint32_t n)
{
        for (int k = 0; r->layered && r->model.noutputs > 1 && k < r->model.noutputs; k++) {
                for (size_t i = 0; r->out_label[k] && i < n; i++) {
                        float *v = &t[i * (size_t)r->tvals + (size_t)r->out_col[k]];
                        int c = (int)floorf((*v + 1.0f) * 0.5f * (float)r->out_w[k]);

                        *v = (float)(c < 0 ? 0 : c >= r->out_w[k] ? r->out_w[k] - 1 : c);
                }
        }
}

/*
 * --synthetic-regression: one synthetic set (seed + 1) of N + REGRESSION_TEST rows, so that
 * both splits share the map W; the test split is its last rows.
 */
static int regression_read(struct run *r)
{
        uint32_t n = (uint32_t)r->o.synthetic_regression, dim = (uint32_t)r->widths[0];
        int out = r->layered && r->model.noutputs > 1 ? r->tvals : r->widths[r->nw - 1];
        struct strata_dataset all;

        if (strata_dataset_synthetic_regression(&all, &r->data, n + REGRESSION_TEST, dim, out,
                                                r->o.seed + 1))
                return bad("%s", strata_last_error());
        class_columns(r, (float *)(uintptr_t)all.t, n + REGRESSION_TEST);
        if (bce_targets(r, all.t, STRATA_F32, n + REGRESSION_TEST, out,
                        "--synthetic-regression's targets"))
                return 2;
        if (strata_dataset_arrays(&r->train, all.x, STRATA_F32, n, dim, all.t, STRATA_F32,
                                  out) ||
            strata_dataset_arrays(&r->test, (const float *)all.x + (size_t)n * dim, STRATA_F32,
                                  REGRESSION_TEST, dim,
                                  (const float *)all.t + (size_t)n * out, STRATA_F32, out))
                return bad("%s", strata_last_error());
        return 0;
}

/* Both splits into the arena: generated (seeds seed+1, seed+2) or read from the files. */
static int data_read(struct run *r, char p[4][PATH_BUF])
{
        uint32_t dim = (uint32_t)r->widths[0];
        int rc, classes = r->widths[r->nw - 1];

        if (r->o.synthetic_regression)
                return regression_read(r);
        if (r->o.synthetic) {
                rc = strata_dataset_synthetic(&r->train, &r->data, (uint32_t)r->o.synthetic,
                                              dim, classes, r->o.seed + 1);
                if (!rc)
                        rc = strata_dataset_synthetic(&r->test, &r->data, 10000, dim, classes,
                                                      r->o.seed + 2);
        } else {
                rc = strata_dataset_load(&r->train, &r->data, p[0], p[1]);
                if (!rc)
                        rc = strata_dataset_load(&r->test, &r->data, p[2], p[3]);
        }
        if (rc)
                return bad("%s", strata_last_error());
        return 0;
}

/* The first label of @p ds beyond the model's @p out outputs, named with its index and file. */
static int label_beyond(const struct strata_dataset *ds, int out, const char *file)
{
        for (uint32_t i = 0; ds->labels && i < ds->n; i++) {
                if (ds->labels[i] < out)
                        continue;
                return bad("%s: label %u at index %u is outside the model's %d outputs (classes "
                           "0..%d)", file, ds->labels[i], i, out, out - 1);
        }
        return 0;
}

/*
 * --loss must fit the data: a float-target loss for float targets, ce for labels; a line of
 * several outputs takes a row of float targets (a cross-entropy output's class index one
 * value of it), a line's one output its own loss's.
 */
static int loss_fits(const struct run *r)
{
        const struct strata_model *m = &r->model;

        if (!r->train.t == !float_row(r))
                return 0;
        if (r->layered && m->noutputs > 1)
                return bad("--model's %d outputs take a row of float targets (a cross-entropy "
                           "output's class index one value of it); the data has labels",
                           m->noutputs);
        if (r->layered && m->noutputs == 1 && m->outputs[0].loss)
                return bad("--model's output takes %s; the data has %s",
                           m->outputs[0].loss->float_targets ? "float targets" : "labels",
                           r->train.t ? "float targets" : "labels");
        if (!r->o.loss) /* the default, not the user's word: say what to give */
                return bad("the data has %s, which the default loss (ce, class labels) does not "
                           "take: give --loss mse, l1, huber or bce",
                           r->train.t ? "float targets" : "labels");
        return bad("--loss %s does not fit the data's %s (float targets: mse, l1, huber or bce; "
                   "labels: ce)", r->o.loss->name, r->train.t ? "float targets" : "labels");
}

/*
 * The model must fit the data; and the test split what the training split set up, or the
 * first evaluation (after a whole epoch of training) would fail. @p p names the files
 * (synthetic data: "synthetic").
 */
static int data_check(const struct run *r, char p[4][PATH_BUF])
{
        int in = r->widths[0], out = r->widths[r->nw - 1];

        if (loss_fits(r))
                return 2;
        if (r->train.t && r->layered && r->model.noutputs > 1 && r->train.tdim != r->tvals)
                return bad("--model: the targets are %d wide, the model's outputs take %d "
                           "(one class index for each cross-entropy output)", r->train.tdim,
                           r->tvals);
        if (r->train.t && !(r->layered && r->model.noutputs > 1) && r->train.tdim != out)
                return bad("--model: the targets are %d wide, the model has %d outputs",
                           r->train.tdim, out);
        if ((uint32_t)in != r->train.dim)
                return bad("--model: input width must be the image size (%u), got %d",
                           r->train.dim, in);
        if (r->test.dim != r->train.dim)
                return bad("the test images (%.1000s) have %u features each, the training "
                           "images (%.1000s) %u", p[2], r->test.dim, p[0], r->train.dim);
        if (label_beyond(&r->train, out, p[1]) || label_beyond(&r->test, out, p[3]))
                return 2;
        return 0;
}

/** @brief --model's widths, then the data sized, mapped, read and checked against them. */
int data_load(struct run *r)
{
        char p[4][PATH_BUF];
        size_t samples = 0;

        r->set = "test";
        if (r->o.inputs)
                return h5_data_load(r) || loss_fits(r) || sets_split(r) ? 2 : 0;
        idx_paths(&r->o, p);
        if (layers_given(r->o.model)) {
                if (layers_model(r, r->o.synthetic || r->o.synthetic_regression ? NULL : p[0]))
                        return 2;
        } else if ((r->nw = strata_tool_parse_widths(r->o.model, r->widths,
                                                     MAX_MODULES / 4)) < 0) {
                return bad("--model: '%s' is neither widths like 784-256-128-10 nor modules "
                           "like 'conv2d(16,3) relu flatten linear(10)'", r->o.model);
        }
        if (data_size(r, p, &samples) || data_map(r, p, samples) || data_read(r, p))
                return 2;
        if (r->o.synthetic)
                for (int i = 0; i < 4; i++)
                        snprintf(p[i], PATH_BUF, "synthetic %s", i < 2 ? "training" : "test");
        return data_check(r, p) || sets_split(r) ? 2 : 0;
}

/**
 * @brief The sampler and the loaders (images standardised with the training set's statistics
 *        unless --raw-pixels), the evaluation set's order, bce's outputs and the step times,
 *        all in the tool's arena.
 */
int data_loaders(struct run *r)
{
        void *p;

        if (strata_sampler_init(&r->sampler, &r->data, r->train.n, 1, 0, !r->o.no_shuffle, 0,
                                r->o.seed) ||
            strata_loader_init(&r->loader, &r->data, &r->train, r->o.batch, r->o.drop_last) ||
            strata_loader_init(&r->tloader, &r->data, &r->test, r->o.batch, 0) ||
            strata_arena_alloc(&r->data, sizeof(uint32_t) * r->test.n, 0, &p))
                return bad("%s", strata_last_error());
        r->test_idx = p;
        if (eval_outputs(r))
                return 2;
        if (!r->o.raw && r->train.images) { /* an arrays set is used as it is */
                strata_loader_standardize(&r->loader, &r->train);
                r->tloader.scale = r->loader.scale;
                r->tloader.shift = r->loader.shift;
        }
        for (uint32_t i = 0; i < r->test.n; i++)
                r->test_idx[i] = i;
        if (strata_arena_alloc(&r->data,
                               sizeof(double) * (size_t)r->steps_per_epoch * r->o.epochs, 0, &p))
                return bad("%s", strata_last_error());
        r->step_times = p;
        if (strata_arena_alloc(&r->data,
                               sizeof(double) * (size_t)r->steps_per_epoch * r->o.epochs, 0, &p))
                return bad("%s", strata_last_error());
        r->step_cpu = p;
        return sets_loaders(r);
}
