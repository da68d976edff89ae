/*
 * strata-train's validation and test sets in one run (Lightning's val/test split): with a test
 * set (Fashion-MNIST's test files, a synthetic test split, --test-data) and --val-fraction F,
 * the last fraction F of the training samples is held out as the validation set, the same
 * samples every run (no shuffle: the data's order). Every epoch's evaluation, and what
 * --monitor, --early-stop, --save-top-k and the plateau schedule watch, is then the
 * validation set's ("val_*"); the test set is evaluated once, after training ("test_*",
 * on stdout, in --json, in the TensorBoard log). The held-out samples are a view of the
 * training set's memory: nothing is copied. An HDF5 --data with --val-fraction alone keeps its
 * own split (h5data.c): validation, no test set.
 */
#include <stdio.h>
#include <string.h>

#include "tools/train/train.h"

/* Bytes of one row of @p cols values of @p type. */
static size_t row_bytes(enum strata_dtype type, int cols)
{
        return (size_t)cols * (type == STRATA_F64 ? 8 : 4);
}

/**
 * @brief After the data is read: --val-fraction's validation set carved from the end of the
 *        training set when the run also has a test set. 0, or 2 after the message.
 */
int sets_split(struct run *r)
{
        struct strata_dataset *t = &r->train, *v = &r->val;
        uint32_t nval = (uint32_t)((double)t->n * (double)r->o.val_fraction);

        if (!(r->o.val_fraction > 0.0f) || strcmp(r->set, "test"))
                return 0;
        if (nval == 0 || nval >= t->n)
                return bad("--val-fraction %g of the %u training samples leaves %s",
                           (double)r->o.val_fraction, t->n,
                           nval ? "no training sample" : "no validation sample");
        *v = *t;
        v->n = nval;
        t->n -= nval;
        if (t->images)
                v->images = t->images + (size_t)t->n * t->dim;
        if (t->labels)
                v->labels = t->labels + t->n;
        if (t->x)
                v->x = (const char *)t->x + (size_t)t->n * row_bytes(t->xtype, (int)t->dim);
        if (t->t)
                v->t = (const char *)t->t + (size_t)t->n * row_bytes(t->ttype, t->tdim);
        if (t->y)
                v->y = t->y + t->n;
        r->set = "val";
        return 0;
}

/**
 * @brief The validation set's loader (the training set's standardisation) and order, in the
 *        tool's arena. 0, or 2 after the message.
 */
int sets_loaders(struct run *r)
{
        void *p;

        if (!r->val.n)
                return 0;
        if (strata_loader_init(&r->vloader, &r->data, &r->val, r->o.batch, 0) ||
            strata_arena_alloc(&r->data, sizeof(uint32_t) * r->val.n, 0, &p))
                return bad("%s", strata_last_error());
        r->val_idx = p;
        for (uint32_t i = 0; i < r->val.n; i++)
                r->val_idx[i] = i;
        r->vloader.scale = r->tloader.scale;
        r->vloader.shift = r->tloader.shift;
        return 0;
}

/**
 * @brief With a validation set, after training: the test set evaluated once, every batch
 *        (--limit-val-batches is the validation's), its line on stdout (or its --json object)
 *        and its scalars in the TensorBoard log at step @p step. 0, or the library's status.
 */
int sets_test(struct run *r, long step)
{
        struct evaluation ev;
        const char *set = r->set;
        char buf[512];
        int rc;

        if (!r->val.n)
                return 0;
        r->testing = 1;
        r->set = "test";
        rc = eval_pass(r, &ev);
        if (!rc && strata_is_global_zero(r->rt)) {
                if (r->o.json)
                        printf("{\"test\":true,%s}\n", eval_fields(r, &ev, 1, buf, sizeof(buf)));
                else if (!r->o.quiet)
                        printf("test (once, after training): %s\n",
                               eval_fields(r, &ev, 0, buf, sizeof(buf)));
                tb_scalar("test_loss", ev.loss, step);
                tb_scalar("test_acc", ev.acc, step);
                tb_scalar("test_mse", ev.mse, step);
                tb_scalar("test_mae", ev.mae, step);
        }
        r->set = set;
        r->testing = 0;
        return rc;
}
