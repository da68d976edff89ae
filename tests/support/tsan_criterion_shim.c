/*
 * ThreadSanitizer build only: lets Criterion start under TSan.
 *
 * Criterion's BoxFort maps its shared arena with MAP_FIXED at a random address in
 * [0x2000'0000'0000, 0x7f00'0000'0000); TSan refuses fixed mappings outside its application
 * ranges, so the runner aborts ("Could not initialize inheritable arena", Criterion issue
 * #274). BoxFort probes candidate addresses with mincore() and accepts any final address
 * inside that window. So, in that window only, mincore() reports "unmapped",
 * and a shared fixed mapping that TSan refuses is retried at a hint inside TSan's application
 * range for PIE binaries (which lies inside the window). Nothing in the library under test is touched.
 * This file is compiled without TSan instrumentation: it runs before TSan's runtime is ready.
 */
#if defined(__SANITIZE_THREAD__)
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static int in_window(const void *addr)
{
        return (unsigned long)addr >= 0x200000000000UL && (unsigned long)addr < 0x7f0000000000UL;
}

static void *retry_unfixed(mmap_fn real, void *addr, size_t len, int prot, int flags, int fd,
                           off_t off)
{
        void *p = real(addr, len, prot, flags, fd, off);

        if (p == MAP_FAILED && (flags & MAP_FIXED) && (flags & MAP_SHARED) && fd >= 0 &&
            in_window(addr)) {
                /* Hint addresses in TSan's application range for PIE binaries, inside the window. */
                for (unsigned long h = 0x560000000000UL; h < 0x568000000000UL; h += 0x100000000UL) {
                        p = real((void *)h, len, prot, flags & ~MAP_FIXED, fd, off);
                        if (p != MAP_FAILED && in_window(p))
                                break;
                        if (p != MAP_FAILED)
                                munmap(p, len);
                        p = MAP_FAILED;
                }
        }
        return p;
}

/* TSan's own interceptors (clang links them statically); weak so a plain link still works. */
extern void *__interceptor_mmap(void *, size_t, int, int, int, off_t) __attribute__((weak));
extern void *__interceptor_mmap64(void *, size_t, int, int, int, off_t) __attribute__((weak));
extern int __interceptor_mincore(void *, size_t, unsigned char *) __attribute__((weak));

int mincore(void *addr, size_t len, unsigned char *vec);
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
        static mmap_fn real;

        if (!real)
                real = __interceptor_mmap64 ? __interceptor_mmap64
                                            : (mmap_fn)dlsym(RTLD_NEXT, "mmap64");
        return retry_unfixed(real, addr, len, prot, flags, fd, off);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
        static mmap_fn real;

        if (!real)
                real = __interceptor_mmap ? __interceptor_mmap : (mmap_fn)dlsym(RTLD_NEXT, "mmap");
        return retry_unfixed(real, addr, len, prot, flags, fd, off);
}

int mincore(void *addr, size_t len, unsigned char *vec)
{
        static int (*real)(void *, size_t, unsigned char *);

        if (in_window(addr)) {
                errno = ENOMEM;
                return -1;
        }
        if (!real)
                real = __interceptor_mincore
                               ? __interceptor_mincore
                               : (int (*)(void *, size_t, unsigned char *))dlsym(RTLD_NEXT, "mincore");
        return real(addr, len, vec);
}
#else
/* Other builds: nothing to do. */
typedef int strata_tsan_shim_unused;
#endif
