/*
 * export_safetensors: the model's parameter groups (device 0's, every group strata_parameter
 * walks, values only) as one safetensors file for PyTorch: an 8-byte little-endian header
 * length, a JSON header padded with spaces to 8 bytes, then every group's f32 values in group
 * order. It goes through the checkpoint's writer (save.c), so the file is written through the
 * runtime's CheckpointIO and committed or aborted as a checkpoint is. Across processes, fsdp's
 * trained values come from their owners: every process calls it and process 0 writes. The
 * header's "__metadata__" holds the format's two pairs and the application's own
 * (strata_export_safetensors_meta()), escaped as JSON strings.
 */
#include <stdio.h>
#include <string.h>

#include "strata/status.h"
#include "strategy/checkpoint/checkpoint.h"

/* One safetensors header entry for parameter group @p p at data offset @p off. */
static int st_entry(char *buf, size_t n, const struct strata_param *p, uint64_t off, int first)
{
        char shape[24 * STRATA_MAX_PARAM_DIMS]; /* the extents in decimal, comma-separated */
        size_t at = 0;

        for (int d = 0; d < p->group.ndim && d < STRATA_MAX_PARAM_DIMS; d++)
                at += (size_t)snprintf(shape + at, sizeof(shape) - at, "%s%zu", d ? "," : "",
                                       p->group.shape[d]);
        return snprintf(buf, n, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],"
                        "\"data_offsets\":[%llu,%llu]}", first ? "" : ",", p->name, shape,
                        (unsigned long long)off,
                        (unsigned long long)(off + p->group.count * sizeof(float)));
}

/* The export's metadata: the application's pairs after the two it always holds. */
struct st_meta {
        const struct strata_meta_entry *pairs;
        int n;
};

/* @p str as a JSON string (quoted, '"', '\\' and control bytes escaped) into @p s (NULL: only
 * measured); its length. */
static uint64_t st_string(struct strata__ckpt_sink *s, const char *str)
{
        static const char hex[] = "0123456789abcdef";
        uint64_t n = 2;

        if (s)
                strata__ckpt_take(s, "\"", 1);
        for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
                char e[6] = { '\\', (char)*c, 0 };
                size_t k = 2;

                if (*c < 0x20) {
                        memcpy(e, "\\u00", 4);
                        e[4] = hex[*c >> 4];
                        e[5] = hex[*c & 15];
                        k = 6;
                } else if (*c != '"' && *c != '\\') {
                        e[0] = (char)*c;
                        k = 1;
                }
                if (s)
                        strata__ckpt_take(s, e, k);
                n += k;
        }
        if (s)
                strata__ckpt_take(s, "\"", 1);
        return n;
}

static const char st_meta_head[] = ",\"__metadata__\":{\"format\":\"pt\",\"producer\":\"strata\"";

/* The metadata object and the header's closing brace into @p s (NULL: measured); length. */
static uint64_t st_metadata(struct strata__ckpt_sink *s, const struct st_meta *m)
{
        uint64_t n = sizeof(st_meta_head) - 1 + 2;

        if (s)
                strata__ckpt_take(s, st_meta_head, sizeof(st_meta_head) - 1);
        for (int i = 0; m && i < m->n; i++) {
                if (s)
                        strata__ckpt_take(s, ",", 1);
                n += 2 + st_string(s, m->pairs[i].key);
                if (s)
                        strata__ckpt_take(s, ":", 1);
                n += st_string(s, m->pairs[i].value);
        }
        if (s)
                strata__ckpt_take(s, "}}", 2);
        return n;
}

/* The header into @p s (NULL: only measured into *len), padded with spaces to 8 bytes. */
static int st_header(struct strata_runtime *rt, struct strata__ckpt_sink *s,
                     const struct st_meta *m, uint64_t *len)
{
        const struct strata__replica *r0 = strata__rep(rt, 0);
        uint64_t off = 0, total = 1;
        struct strata_param p;
        char buf[384];

        if (s)
                strata__ckpt_take(s, "{", 1);
        for (int g = 0; g < strata__replica_nparams(r0); g++) {
                int k;

                strata__replica_param(r0, g, &p);
                k = st_entry(buf, sizeof(buf), &p, off, g == 0);
                if (k < 0 || (size_t)k >= sizeof(buf))
                        return strata__fail(STRATA_EOVERFLOW, "safetensors: entry too long");
                if (s)
                        strata__ckpt_take(s, buf, (size_t)k);
                total += (uint64_t)k;
                off += p.group.count * sizeof(float);
        }
        total += st_metadata(s, m);
        if (s) {
                static const char spaces[8] = "       ";

                strata__ckpt_take(s, spaces, (size_t)(*len - total));
        }
        *len = (total + 7) / 8 * 8;
        return STRATA_OK;
}

/*
 * The safetensors file into @p s: the header's length, the header, every group's values (fsdp's
 * trained values from their owners, piece by piece, across processes through process 0).
 */
static int st_fill(struct strata_runtime *rt, struct strata__ckpt_sink *s,
                   const struct strata__ckpt_content *c)
{
        const struct st_meta *m = c->app;
        struct strata__ckpt_tensor t;
        uint64_t len = 0, le;

        STRATA_TRY(st_header(rt, NULL, m, &len));
        le = len; /* little-endian u64: the byte order checkpoints are written in */
        strata__ckpt_take(s, &le, sizeof(le));
        STRATA_TRY(st_header(rt, s, m, &len));
        for (int g = 0; g < strata__replica_nparams(strata__rep(rt, 0)); g++) {
                strata__ckpt_values(rt, g, &t); /* fsdp: sharded, from the owners */
                STRATA_TRY(strata__ckpt_stream(rt, &t, s));
        }
        return STRATA_OK;
}

/* The application's metadata: at most STRATA_EXPORT_META pairs of bounded, named strings. */
static int meta_check(const struct strata_meta_entry *meta, int n)
{
        if (n < 0 || n > STRATA_EXPORT_META || (n && !meta))
                return strata__fail(STRATA_EINVAL, "export_safetensors: %d metadata pairs (0 to "
                                    "%d, non-NULL)", n, STRATA_EXPORT_META);
        for (int i = 0; i < n; i++) {
                const char *k = meta[i].key, *v = meta[i].value;

                if (!k || !*k || !v)
                        return strata__fail(STRATA_EINVAL, "export_safetensors: metadata pair "
                                            "%d has a NULL or empty key or a NULL value", i);
                if (strlen(k) >= 256 || strlen(v) >= STRATA_WEIGHTS_META)
                        return strata__fail(STRATA_EINVAL, "export_safetensors: metadata '%.64s' "
                                            "is too long (keys under 256 bytes, values under "
                                            "%d)", k, STRATA_WEIGHTS_META);
                if (!strcmp(k, "format") || !strcmp(k, "producer") || !strcmp(k, "__metadata__"))
                        return strata__fail(STRATA_EINVAL, "export_safetensors: metadata key "
                                            "'%s' is the export's own", k);
                for (int j = 0; j < i; j++)
                        if (!strcmp(k, meta[j].key))
                                return strata__fail(STRATA_EINVAL, "export_safetensors: "
                                                    "metadata key '%.64s' given twice", k);
        }
        return STRATA_OK;
}

int strata_export_safetensors_meta(struct strata_runtime *rt, const char *path,
                                   const struct strata_meta_entry *meta, int n)
{
        const struct st_meta m = { meta, n };
        const struct strata__ckpt_content c = { st_fill, "export_safetensors", &m, 0 };

        STRATA_TRY(strata__ckpt_between_steps(rt, "export_safetensors", path));
        STRATA_TRY(meta_check(meta, n));
        /* across processes fsdp's values are in every process: all call it, process 0 writes */
        return strata__ckpt_written(rt, path, &c,
                                    strata__ckpt_across(rt) &&
                                            strata__shard_own_params(strata__rep_shard(rt, 0)));
}

int strata_export_safetensors(struct strata_runtime *rt, const char *path)
{
        return strata_export_safetensors_meta(rt, path, NULL, 0);
}
