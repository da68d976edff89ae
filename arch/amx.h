/*
 * Intel AMX (internal): the tile configuration the bf16 GEMM (drivers/cpu/lowp.c) and the
 * kernels' benchmark load, and Linux's grant of the tile data to the process.
 */
#ifndef STRATA_ARCH_AMX_H
#define STRATA_ARCH_AMX_H

#include <stdint.h>

#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* LDTILECFG's 64-byte operand. */
struct strata__amx_config {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
};

/* Palette 1: tiles 0-7 of 16 rows of 64 bytes (every tile the 2 x 2 blocks use). */
static const struct strata__amx_config strata__amx_16x64 = {
        .palette = 1,
        .colsb = { 64, 64, 64, 64, 64, 64, 64, 64 },
        .rows = { 16, 16, 16, 16, 16, 16, 16, 16 },
};

/*
 * Asks Linux (5.16+) for the tile data: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
 * process-wide; without the grant the first tile instruction faults. 1 when granted.
 */
static inline int strata__amx_request(void)
{
#if defined(__x86_64__) && defined(__linux__)
        return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                       18 /* XFEATURE_XTILEDATA */) == 0;
#else
        return 0;
#endif
}

#endif /* STRATA_ARCH_AMX_H */
