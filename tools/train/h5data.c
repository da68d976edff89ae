/*
 * strata-train's data from an HDF5 file (--data FILE.h5 --inputs NAME --targets NAME): both
 * datasets described from the file's metadata (h5.c), the tool's arena sized from them and
 * mapped, the arrays read into it; the evaluation set is --test-data's file, the last
 * --val-fraction of the samples, or else the training samples themselves; the model sized
 * from the arrays unless --model says otherwise; then the arrays become the run's data sets.
 */
#include <stdio.h>

#include "tools/train/h5.h"
#include "tools/train/train.h"
#include "tools/widths.h"

/* The files' arrays: they live in the arena, these describe them for the whole run. */
static struct h5_set file, test_file;

/* Describe --data's datasets (and --test-data's, which must match); size the arena. */
static int h5_size(struct run *r, size_t *samples)
{
        const struct opts *o = &r->o;

        if (h5_query(&file, o->data, o->inputs, o->targets) ||
            (o->test_data && (h5_query(&test_file, o->test_data, o->inputs, o->targets) ||
                              h5_match(&file, &test_file))))
                return bad("%s", h5_error());
        *samples = (size_t)file.x.n + (o->test_data ? test_file.x.n : 0);
        r->data_bytes = h5_bytes(&file) + (o->test_data ? h5_bytes(&test_file) : 0) +
                        /* float targets' staging, bce's outputs */
                        (size_t)o->batch * file.t.width * 12;
        r->widths[0] = (int)file.x.width; /* the staging batch data_map() sizes */
        return 0;
}

/* --loss bce: the targets of @p s are probabilities, named by file, dataset and sample. */
static int h5_bce(const struct run *r, const struct h5_set *s)
{
        char what[1024];

        if (s->t.type == STRATA_I32)
                return 0; /* labels: data.c's loss_fits() refuses bce for them */
        snprintf(what, sizeof(what), "%s: dataset '%s'", s->t.file, s->t.name);
        return bce_targets(r, s->t.data, s->t.type, s->t.n, (int)s->t.width, what);
}

/* A line of several outputs: each label output's values of @p s class indices. */
static int h5_labels(const struct run *r, const struct h5_set *s)
{
        char what[1024];

        if (s->t.type == STRATA_I32)
                return 0; /* labels: data.c's loss_fits() refuses them for such a model */
        snprintf(what, sizeof(what), "%s: dataset '%s'", s->t.file, s->t.name);
        return label_targets(r, s->t.data, s->t.type, s->t.n, what);
}

/*
 * Read the arrays; the training and evaluation sets from them, the evaluation set named for
 * what it is: --test-data's file, the --val-fraction held out, or the training samples.
 */
static int h5_read(struct run *r, struct h5_set *train, struct h5_set *eval)
{
        const struct opts *o = &r->o;

        if (h5_load(&file, &r->data) || (o->test_data && h5_load(&test_file, &r->data)))
                return bad("%s", h5_error());
        if (h5_bce(r, &file) || (o->test_data && h5_bce(r, &test_file)))
                return 2;
        *train = file;
        *eval = o->test_data ? test_file : file;
        r->set = o->test_data ? "test" : o->val_fraction > 0.0f ? "val" : "train_eval";
        if (!o->test_data && o->val_fraction > 0.0f && /* with a test file: sets.c's split */
            h5_split(&file, o->val_fraction, train, eval))
                return bad("%s", h5_error());
        return 0;
}

/* The outputs the targets ask for: their values a sample, or the highest label + 1. */
static int h5_outputs(const struct h5_set *train, const struct h5_set *eval)
{
        int top = train->t.max_label > eval->t.max_label ? train->t.max_label :
                                                           eval->t.max_label;

        return train->t.type == STRATA_I32 ? top + 1 : (int)train->t.width;
}

/* --model, or IN-256-128-OUT from the arrays; its widths must fit them. */
static int h5_model(struct run *r, const struct h5_set *train, const struct h5_set *eval)
{
        static char spec[64];
        int out = h5_outputs(train, eval), last;

        if (!r->o.model_set) {
                snprintf(spec, sizeof(spec), "%u-256-128-%d", train->x.width, out);
                r->o.model = spec;
        }
        if (layers_given(r->o.model)) {
                layers_h5_layout(r, train->x.rank, train->x.dims);
                if (layers_model(r, NULL))
                        return 2;
        } else if ((r->nw = strata_tool_parse_widths(r->o.model, r->widths,
                                                     MAX_MODULES / 4)) < 0) {
                return bad("--model: '%s' is neither widths like 784-256-128-10 nor modules "
                           "like 'input(1,64,64) conv2d(1,3,padding=same) flatten'",
                           r->o.model);
        }
        last = r->widths[r->nw - 1];
        if ((uint32_t)r->widths[0] != train->x.width)
                return bad("--model: input width must be the %u values a sample of the inputs, "
                           "got %d", train->x.width, r->widths[0]);
        if (train->t.type == STRATA_I32 && last < out)
                return bad("--model: %d output%s, but the labels go up to %d: %d outputs are "
                           "needed", last, last == 1 ? "" : "s", out - 1, out);
        if (r->layered && r->model.noutputs > 1) /* a label output: one value of the row */
                last = r->tvals;
        if (train->t.type != STRATA_I32 && last != out)
                return bad("--model: %d output%s, but the targets have %d value%s a sample%s",
                           last, last == 1 ? "" : "s", out, out == 1 ? "" : "s",
                           last != r->widths[r->nw - 1] ? " (the outputs take one class index "
                           "each for cross-entropy, their widths for the others)" : "");
        return h5_labels(r, train) || h5_labels(r, eval) ? 2 : 0;
}

/*
 * The wiring of an HDF5 set into a data set the sampler and the loaders walk: the library's
 * in-memory arrays (no copy; f64 converted where each device gathers its rows).
 */
static int h5_dataset(struct strata_dataset *ds, const struct h5_set *s)
{
        if (strata_dataset_arrays(ds, s->x.data, s->x.type, s->x.n, s->x.width, s->t.data,
                                  s->t.type, (int)s->t.width))
                return bad("%s: %s", s->x.file, strata_last_error());
        return 0;
}

/**
 * @brief --data FILE.h5: the arrays sized, mapped, read and checked; the model; data sets
 *        (data.c checks --loss against them).
 */
int h5_data_load(struct run *r)
{
        struct h5_set train, eval;
        size_t samples = 0;

        if (h5_size(r, &samples) || data_map(r, NULL, samples) || h5_read(r, &train, &eval) ||
            h5_model(r, &train, &eval))
                return 2;
        return h5_dataset(&r->train, &train) || h5_dataset(&r->test, &eval) ? 2 : 0;
}
