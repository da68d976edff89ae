/* Per-ISA primitives: spin-wait hint and timestamps (internal). */
#ifndef STRATA_ARCH_ARCH_H
#define STRATA_ARCH_ARCH_H

#include <stdint.h>

/** Spin-wait hint: lets the sibling hyperthread run and saves power. */
static inline void strata__pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield");
#endif
}

#endif /* STRATA_ARCH_ARCH_H */
