/* libm_results.c - cbrt, fmod, fma, floor and sqrt over 300000 arguments of every sign and a
 * wide range of magnitudes, their results' bits folded into one FNV-1a hash, printed with
 * cbrt(2) to 17 digits. Built with -DUSE_MPI the same computation runs between MPI_Init and
 * MPI_Finalize, as in a simulation code: linked with stormcc it must print exactly what the
 * program prints linked without MPI, i.e. libmpi.a must not bring its own libm. Also valid C++
 * (tests/tests/compiler_wrapper.rs builds it with stormcxx too). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef USE_MPI
#include <mpi.h>
#endif

static uint64_t fold(uint64_t hash, double value)
{
    unsigned char bytes[sizeof value];
    memcpy(bytes, &value, sizeof value);
    for (size_t i = 0; i < sizeof value; i++)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    return hash;
}

int main(int argc, char **argv)
{
    int rank = 0;
#ifdef USE_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#else
    (void)argc;
    (void)argv;
#endif
    /* volatile: the compiler must not fold the calls at compile time. */
    volatile double two = 2.0;
    volatile int count = 300000;
    uint64_t hash = 14695981039346656037ull;
    for (int i = 0; i < count; i++) {
        double sign = (i & 1) ? -1.0 : 1.0;
        double x = sign * ldexp(1.0 + (i % 9973) / 9973.0, i % 160 - 80);
        double y = ldexp(1.0 + (i % 7919) / 7919.0, i % 40 - 20);
        hash = fold(hash, cbrt(x));
        hash = fold(hash, fmod(x, y));
        hash = fold(hash, fma(x, y, -x / 3.0));
        hash = fold(hash, floor(x * 1000.5));
        hash = fold(hash, sqrt(fabs(x)));
    }
    if (rank == 0) {
        printf("cbrt(2) = %.17g\n", cbrt(two));
        printf("hash %016llx\n", (unsigned long long)hash);
    }
#ifdef USE_MPI
    MPI_Finalize();
#endif
    return 0;
}
