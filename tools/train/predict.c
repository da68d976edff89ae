/*
 * --predict FILE --predictions OUT.h5: a trained model's outputs on every sample of the
 * evaluation set, in order, into an HDF5 file. The runtime is inference only (one device, no
 * gradients or optimizer state planned); the weights are a safetensors file's or a
 * checkpoint's (of any optimizer). Every batch is predicted into one mapping made before the
 * first, then the file is written once: to a temporary name beside OUT.h5 (base/output.h's
 * safe output: created exclusively, fsynced, renamed over the path, the directory fsynced),
 * so OUT.h5 is either what it was or complete. Layout (docs/guide.md):
 *   /predictions  float32 [samples, outputs]: the model's outputs, one row a sample (a
 *                 model of several outputs: theirs side by side, in the line's order)
 *   /classes      int32 [samples]: the argmax of each row (cross-entropy only)
 *   attributes on /: "weights" (the FILE given), "set" (test, val or train_eval).
 */
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/train/train.h"

/** @brief --predict FILE, --predictions OUT.h5: 0, or -1 for another option. */
int predict_option(int c, const char *s, struct opts *o)
{
        if (c == OPT_PREDICT) {
                o->predict = s;
                return 0;
        }
        if (c == OPT_PREDICTIONS) {
                o->predictions = s;
                return 0;
        }
        return -1;
}

/**
 * @brief --predict before any data is read: with --predictions, neither given alone, the
 *        weights readable, the output writable, nothing that trains. 0, or 2 after the message.
 */
int predict_check(const struct opts *o)
{
        struct stat st;

        if (!o->predict && !o->predictions)
                return 0;
        if (!o->predict)
                return bad("--predictions %s: give the weights to predict with (--predict "
                           "FILE)", o->predictions);
        if (!o->predictions)
                return bad("--predict %s: give the HDF5 file to write (--predictions OUT.h5)",
                           o->predict);
        if (o->evaluate || o->resume || o->init_weights || o->ckpt_dir || o->export_initial)
                return bad("--predict FILE trains nothing: --%s has no use with it",
                           o->evaluate ? "evaluate" : o->resume ? "resume" :
                           o->init_weights ? "init-weights" : o->ckpt_dir ? "ckpt-dir" :
                           "export-initial");
        if (stat(o->predict, &st) != 0 || !S_ISREG(st.st_mode) || access(o->predict, R_OK))
                return bad("--predict %s: %s", o->predict,
                           stat(o->predict, &st) != 0 ? strerror(errno) :
                           !S_ISREG(st.st_mode) ? "is not a regular file" : strerror(errno));
        return weights_writable("predictions", o->predictions);
}

/* The set's @p n rows of @p w outputs into @p out, batch by batch, in order: 0, or 1. */
static int predict_all(struct run *r, float *out, uint32_t n, int w)
{
        struct strata_batch b;
        size_t at = 0;

        strata_loader_reset(&r->tloader, r->test_idx, n);
        while (strata_loader_next_indexed(&r->tloader, &b) > 0) {
                if (strata_predict_step(r->rt, &b, out + at, (size_t)n * w - at))
                        return 1;
                at += (size_t)b.rows * w;
        }
        return at == (size_t)n * w ? 0 : 1;
}

/* Each row's argmax (the first largest), for a model whose loss takes class indices. */
static void classes_of(const float *out, uint32_t n, int w, int32_t *cls)
{
        for (uint32_t i = 0; i < n; i++) {
                const float *row = out + (size_t)i * w;
                int best = 0;

                for (int j = 1; j < w; j++)
                        best = row[j] > row[best] ? j : best;
                cls[i] = best;
        }
}

/* String attribute @p name = @p value on @p loc: 0, or -1. */
static int text_attr(hid_t loc, const char *name, const char *value)
{
        hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR), a = -1;
        int rc = -1;

        if (t >= 0 && s >= 0 && H5Tset_size(t, strlen(value) + 1) >= 0 &&
            (a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0)
                rc = H5Awrite(a, t, value) < 0 ? -1 : 0;
        if (a >= 0)
                H5Aclose(a);
        if (s >= 0)
                H5Sclose(s);
        if (t >= 0)
                H5Tclose(t);
        return rc;
}

/* Dataset @p name of @p rank dims @p d, stored as @p ftype, from @p data in @p mtype: 0, -1. */
static int dataset(hid_t f, const char *name, int rank, const hsize_t *d, hid_t ftype,
                   hid_t mtype, const void *data)
{
        hid_t s = H5Screate_simple(rank, d, NULL), ds = -1;
        int rc = -1;

        if (s >= 0 && (ds = H5Dcreate2(f, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT,
                                       H5P_DEFAULT)) >= 0)
                rc = H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0 ? -1 : 0;
        if (ds >= 0)
                H5Dclose(ds);
        if (s >= 0)
                H5Sclose(s);
        return rc;
}

/* The HDF5 file at @p path (a fresh temporary file): 0, or -1. */
static int write_h5(const struct run *r, const char *path, const float *out, const int32_t *cls,
                    uint32_t n, int w)
{
        hsize_t d[2] = { n, (hsize_t)w };
        hid_t f;
        int rc;

        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        if (f < 0)
                return -1;
        rc = dataset(f, "predictions", 2, d, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, out);
        if (!rc && cls)
                rc = dataset(f, "classes", 1, d, H5T_STD_I32LE, H5T_NATIVE_INT32, cls);
        if (!rc)
                rc = text_attr(f, "weights", r->o.predict);
        if (!rc)
                rc = text_attr(f, "set", r->set);
        return H5Fclose(f) < 0 ? -1 : rc;
}

/*
 * The file through safe output: the temporary file it creates is rewritten by HDF5 by name,
 * then fsynced, renamed and its directory fsynced by the commit. A FIFO or device at the
 * path (written in place) is refused: HDF5 needs a file it can seek in. 0, or 1.
 */
static int publish(const struct run *r, const float *out, const int32_t *cls, uint32_t n, int w)
{
        static char path[STRATA__OUT_PATH], tmp[STRATA__OUT_PATH];
        struct strata__out o = { .fd = -1, .path = path, .tmp = tmp, .what = "predictions" };
        const char *why = NULL;

        if (strata__out_open(&o, r->o.predictions)) {
                bad("--predictions: %s", strata_last_error());
                return 1;
        }
        if (!tmp[0])
                why = "not a regular file (HDF5 writes a file it can seek in)";
        else if (write_h5(r, tmp, out, cls, n, w))
                why = "HDF5 could not write its temporary file";
        if (why) {
                strata__out_abort(&o);
                bad("--predictions %s: %s", r->o.predictions, why);
                return 1;
        }
        if (strata__out_commit(&o)) {
                bad("--predictions: %s", strata_last_error());
                return 1;
        }
        return 0;
}

/* Room for the outputs and the classes, in one mapping of its own: 0, or 1. */
static int room(struct strata_arena *a, uint32_t n, int w, float **out, int32_t **cls)
{
        size_t bytes = (size_t)n * w * sizeof(float) + (size_t)n * sizeof(int32_t) + 128;
        void *p, *q;

        if (strata_arena_map(a, bytes, NULL) ||
            strata_arena_alloc(a, (size_t)n * w * sizeof(float), 64, &p) ||
            strata_arena_alloc(a, (size_t)n * sizeof(int32_t), 64, &q)) {
                bad("--predict: %s", strata_last_error());
                return 1;
        }
        *out = p;
        *cls = q;
        return 0;
}

/**
 * @brief --predict FILE: the weights loaded into the inference-only runtime, the evaluation
 *        set predicted in order, the HDF5 file written. The exit status (2: the weights do
 *        not fit; 1: a failed prediction or write), the runtime torn down.
 */
int predict_run(struct run *r)
{
        struct strata_weights_info info;
        struct strata_arena a;
        uint32_t n = r->test.n;
        int w = r->cfg.classes, rc = 0, labels = !float_row(r) && !eval_fits_bce(r);
        int32_t *cls = NULL;
        float *out = NULL;

        if (strata_load_weights(r->rt, r->o.predict, STRATA_WEIGHTS_STRICT, &info)) {
                bad("--predict: %s", strata_last_error());
                strata_teardown(r->rt);
                return 2;
        }
        if (room(&a, n, w, &out, &cls)) {
                rc = 1;
        } else if (predict_all(r, out, n, w)) {
                fprintf(stderr, "strata-train: --predict: %s\n", strata_last_error());
                rc = 1;
        } else {
                if (labels)
                        classes_of(out, n, w, cls);
                rc = publish(r, out, labels ? cls : NULL, n, w);
        }
        if (!rc && r->o.json)
                printf("{\"predict\":\"%s\",\"predictions\":\"%s\",\"rows\":%u,\"outputs\":%d}\n",
                       r->o.predict, r->o.predictions, n, w);
        else if (!rc && !r->o.quiet)
                printf("predict %s: %u %s rows x %d outputs -> %s\n", r->o.predict, n, r->set, w,
                       r->o.predictions);
        if (strata_teardown(r->rt)) {
                fprintf(stderr, "strata-train: %s\n", strata_last_error());
                rc = 1;
        }
        return rc || stdout_failed() ? (rc ? rc : 1) : 0;
}
