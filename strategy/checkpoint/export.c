/*
 * export_safetensors: the model's parameter groups (device 0's, every group strata_parameter
 * walks, values only) as one safetensors file for PyTorch: an 8-byte little-endian header
 * length, a JSON header padded with spaces to 8 bytes, then every group's f32 values in group
 * order. It goes through the checkpoint's writer (save.c), so the file is written through the
 * runtime's CheckpointIO and committed or aborted as a checkpoint is. Across processes, fsdp's
 * trained values come from their owners: every process calls it and process 0 writes.
 */
#include <stdio.h>

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

static const char st_meta[] = ",\"__metadata__\":{\"format\":\"pt\",\"producer\":\"strata\"}}";

/* The header into @p s (NULL: only measured into *len), padded with spaces to 8 bytes. */
static int st_header(struct strata_runtime *rt, struct strata__ckpt_sink *s, uint64_t *len)
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
        total += sizeof(st_meta) - 1;
        if (s) {
                static const char spaces[8] = "       ";

                strata__ckpt_take(s, st_meta, sizeof(st_meta) - 1);
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
        struct strata__ckpt_tensor t;
        uint64_t len = 0, le;

        (void)c;
        STRATA_TRY(st_header(rt, NULL, &len));
        le = len; /* little-endian u64: the byte order checkpoints are written in */
        strata__ckpt_take(s, &le, sizeof(le));
        STRATA_TRY(st_header(rt, s, &len));
        for (int g = 0; g < strata__replica_nparams(strata__rep(rt, 0)); g++) {
                strata__ckpt_values(rt, g, &t); /* fsdp: sharded, from the owners */
                STRATA_TRY(strata__ckpt_stream(rt, &t, s));
        }
        return STRATA_OK;
}

int strata_export_safetensors(struct strata_runtime *rt, const char *path)
{
        const struct strata__ckpt_content c = { st_fill, "export_safetensors", NULL, 0 };

        STRATA_TRY(strata__ckpt_between_steps(rt, "export_safetensors", path));
        /* across processes fsdp's values are in every process: all call it, process 0 writes */
        return strata__ckpt_written(rt, path, &c,
                                    strata__ckpt_across(rt) &&
                                            strata__shard_own_params(strata__rep_shard(rt, 0)));
}
