/* The checkpoint file format (internal to the library; constants in strata/checkpoint.h). */
#ifndef STRATA_NN_CHECKPOINT_H
#define STRATA_NN_CHECKPOINT_H

#include <stdint.h>

#include "strata/checkpoint.h"

#define STRATA__CKPT_MAGIC "STRATACK"
#define STRATA__CKPT_BOM 0x01020304u
#define STRATA__CKPT_NAME 80

/* The header: fixed size, CRC-32 over all of it with crc = 0. */
/* Bytes of the header's module list: with the loss's name and nmodules, the old reserved. */
#define STRATA__CKPT_MODULES 132

struct strata__ckpt_header {
        char magic[8];
        uint32_t version;
        uint32_t byte_order;    /* STRATA__CKPT_BOM as written by the saving machine */
        uint32_t header_bytes;
        uint32_t entry_bytes;
        uint32_t ntensors;
        uint32_t world;         /* devices of the run that saved */
        uint32_t strategy;      /* enum strata_strategy_kind */
        uint32_t lib_version;   /* STRATA_VERSION_HEX */
        uint64_t step;          /* training steps taken (micro-batches) */
        uint64_t fingerprint;   /* model: widths, modules, parameter groups */
        uint32_t app_bytes;
        uint32_t crc;
        unsigned char app[STRATA_CKPT_APP_BYTES];
        /* The precision plugin and its loss scaler (zero in files from before them: f32). */
        uint32_t precision;     /* enum strata_precision of the run that saved */
        float loss_scale;       /* 0: none recorded */
        uint32_t scale_growth;  /* clean steps since the scale last changed */
        uint32_t scale_pad;
        uint64_t scale_skipped; /* optimizer steps skipped */
        uint32_t chunks;        /* invariant mode: chunks a batch was cut into (0: not) */
        /* The model's loss and modules by kind (zero in files from before them: unknown). */
        char loss[STRATA_CKPT_LOSS_NAME]; /* its ops table's name */
        uint32_t nmodules;      /* its modules (0: not recorded) */
        char modules[STRATA__CKPT_MODULES]; /* their kinds, space-separated, as many as fit */
        uint32_t reserved2;
};

/* One tensor of the table. */
struct strata__ckpt_entry {
        char name[STRATA__CKPT_NAME];
        uint32_t dtype;
        uint32_t ndim;
        uint64_t shape[2];
        uint64_t offset;        /* from the start of the file, 64-byte aligned */
        uint64_t bytes;
        uint32_t crc;           /* CRC-32 of the data */
        uint32_t reserved;
};

_Static_assert(sizeof(struct strata__ckpt_header) == 512, "checkpoint header is 512 bytes");
_Static_assert(sizeof(struct strata__ckpt_entry) == 128, "checkpoint entry is 128 bytes");

/* CRC-32 (zlib's) of @p n bytes, continuing @p crc (0 to start). */
uint32_t strata__crc32(uint32_t crc, const void *p, size_t n);

/* The header's own CRC (computed with its crc field taken as 0). */
uint32_t strata__crc32_header(const struct strata__ckpt_header *h);

#endif /* STRATA_NN_CHECKPOINT_H */
