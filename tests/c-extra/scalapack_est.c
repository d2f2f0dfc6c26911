/*
 * scalapack_est.c - preloaded into Debian's ScaLAPACK test programs (tests/tests/scalapack.rs) to
 * apply ScaLAPACK's own fix for an uninitialised read, so that the programs' control flow does not
 * depend on stack garbage.
 *
 * ScaLAPACK 2.2.1's norm estimators P?LACON copy their output argument EST into a saved variable
 * on every entry, and keep it as the previous estimate; callers (P?GERFS, P?GECON, P?PORFS, ...)
 * pass an EST they never initialised. Where that stack slot holds different bytes on different
 * ranks, the ranks of one process column disagree on whether the estimate converged, call
 * P?GETRS with different TRANS arguments ("On entry to PSGETRS parameter number 1 had an illegal
 * value") and hang. Which bytes are there depends on whatever ran on that stack before, so it
 * changes with the MPI library, the library's build, a preloaded library, or a debugger:
 * xslu hangs with Open MPI as well when LU.dat lists other sizes, and xsllt hung with it as
 * packaged. Reported as Reference-ScaLAPACK/scalapack issue 121, fixed by pull request 122
 * (EST = ZERO on entry), which is not in Debian bookworm's 2.2.1.
 *
 * The wrappers set EST to zero when an estimation starts (KASE = 0). P?LACON writes EST only when
 * it returns its final estimate, and the callers do not touch it between calls, so this is the
 * same as the upstream fix.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* P?LACON for real data has an ISGN work array; the complex ones do not. */
#define REAL_LACON(name, T)                                                              \
    void name(int *n, T *v, int *iv, int *jv, int *descv, T *x, int *ix, int *jx,        \
              int *descx, int *isgn, T *est, int *kase)                                  \
    {                                                                                    \
        static void (*next)(int *, T *, int *, int *, int *, T *, int *, int *, int *,   \
                            int *, T *, int *);                                          \
        if (!next)                                                                       \
            next = (void (*)(int *, T *, int *, int *, int *, T *, int *, int *, int *,  \
                             int *, T *, int *))dlsym(RTLD_NEXT, #name);                 \
        if (!next) {                                                                     \
            fprintf(stderr, "scalapack_est: %s not found\n", #name);                     \
            abort();                                                                     \
        }                                                                                \
        if (*kase == 0)                                                                  \
            *est = 0;                                                                    \
        next(n, v, iv, jv, descv, x, ix, jx, descx, isgn, est, kase);                    \
    }

#define COMPLEX_LACON(name, T, R)                                                        \
    void name(int *n, T *v, int *iv, int *jv, int *descv, T *x, int *ix, int *jx,        \
              int *descx, R *est, int *kase)                                             \
    {                                                                                    \
        static void (*next)(int *, T *, int *, int *, int *, T *, int *, int *, int *,   \
                            R *, int *);                                                 \
        if (!next)                                                                       \
            next = (void (*)(int *, T *, int *, int *, int *, T *, int *, int *, int *,  \
                             R *, int *))dlsym(RTLD_NEXT, #name);                        \
        if (!next) {                                                                     \
            fprintf(stderr, "scalapack_est: %s not found\n", #name);                     \
            abort();                                                                     \
        }                                                                                \
        if (*kase == 0)                                                                  \
            *est = 0;                                                                    \
        next(n, v, iv, jv, descv, x, ix, jx, descx, est, kase);                          \
    }

REAL_LACON(pslacon_, float)
REAL_LACON(pdlacon_, double)
/* Complex data as pairs of reals; only the pointer is passed on. */
COMPLEX_LACON(pclacon_, float, float)
COMPLEX_LACON(pzlacon_, double, double)
