/*
 * --model as a line of modules ("input(1,28,28) conv2d(32,3,padding=1) relu ... linear(10)",
 * strata_model_parse()) instead of widths: the model is the line, its input layout the line's
 * input(...) or, without one, the data's (IDX images: 1 x rows x columns; --synthetic:
 * Fashion-MNIST's 1 x 28 x 28), and its widths for the rest of the tool the input's and the
 * output's.
 */
#include <string.h>

#include "tools/train/train.h"

/** @brief Whether --model is a line of modules (it names one) rather than widths. */
int layers_given(const char *spec)
{
        return spec && strpbrk(spec, "abcdefghijklmnopqrstuvwxyz(") != NULL;
}

/** @brief The layout of an HDF5 array's samples, (C, D, H, W) after the sample dimension. */
void layers_h5_layout(struct run *r, int rank, const uint32_t *dims)
{
        struct strata_dims *d = &r->h5_dims;

        *d = (struct strata_dims){ 0 };
        if (rank < 2 || rank > 1 + STRATA_MAX_SPATIAL)
                return; /* flat: a vector of features, or no layout this model can name */
        d->channels = (int)dims[0];
        d->ndim = rank - 1;
        for (int i = 1; i < rank; i++)
                d->size[i - 1] = (int)dims[i];
}

/*
 * The layout of @p images' samples, an IDX file of rank 3 (n, rows, columns: one channel) or 2
 * (n, features); without images, an HDF5 array's (@p r_h5, when it has one), else none.
 */
static int idx_layout(const char *images, const struct strata_dims *r_h5,
                      struct strata_model *m)
{
        struct strata_idx_info ii;

        if (!images && r_h5 && r_h5->channels) {
                m->in_dims = *r_h5;
                m->in_features = r_h5->channels;
                for (int i = 0; i < r_h5->ndim; i++)
                        m->in_features *= r_h5->size[i];
                return 0;
        }
        if (!images)
                return bad("--model: the line needs input(C,H,W) first: this data has no "
                           "layout of its own");
        if (strata_idx_info(images, &ii))
                return bad("%s", strata_last_error());
        if (ii.ndims == 3) {
                m->in_dims = (struct strata_dims){ 1, 2, { (int)ii.dims[1], (int)ii.dims[2] } };
                m->in_features = (int)(ii.dims[1] * ii.dims[2]);
        } else if (ii.ndims == 2) {
                m->in_features = (int)ii.dims[1];
        } else {
                return bad("--model: %s has %d dimensions; give the line an input(C,H,W)",
                           images, ii.ndims);
        }
        return 0;
}

/**
 * @brief The model from --model's line, its input from input(...) or @p images (NULL: none),
 *        checked module by module; widths become {input, output}. 0, or 2 after the message.
 */
int layers_model(struct run *r, const char *images)
{
        struct strata_dims out;
        long long width;

        r->model = (struct strata_model){ 0 };
        if (strata_model_parse(r->o.model, r->mods, MAX_MODULES, &r->model))
                return bad("--model: %s", strata_last_error());
        if (mesh_attach(r))
                return 2;
        if (!r->model.in_features && r->o.synthetic) { /* the images it stands in for */
                r->model.in_dims = (struct strata_dims){ 1, 2, { 28, 28 } };
                r->model.in_features = 28 * 28;
        }
        if (!r->model.in_features && idx_layout(images, &r->h5_dims, &r->model))
                return 2;
        r->model.loss = r->o.loss; /* the outputs that name none take --loss */
        if (strata_model_output(&r->model, &out) ||
            strata_model_targets(&r->model, &r->tvals, r->out_w))
                return bad("--model: %s", strata_last_error());
        for (int k = 0, col = 0; k < r->model.noutputs; k++) {
                const struct strata_loss_ops *loss = r->model.outputs[k].loss;

                loss = loss ? loss : r->o.loss ? r->o.loss : &strata_softmax_cross_entropy;
                r->out_label[k] = !loss->float_targets;
                r->out_col[k] = col;
                col += r->out_label[k] ? 1 : r->out_w[k];
        }
        width = out.channels;
        for (int d = 0; d < out.ndim; d++)
                width *= out.size[d];
        r->widths[0] = r->model.in_features;
        r->widths[1] = (int)width;
        r->nw = 2;
        r->layered = 1;
        return 0;
}
