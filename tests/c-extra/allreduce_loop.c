/*
 * allreduce_loop.c - ITERS blocking MPI_Allreduce calls (MPI_SUM) of INTS ints on
 * MPI_COMM_WORLD, for tests that count the bytes a job's collectives move over a network.
 *
 * Rank r contributes r * 1000003 + k + i at element k of call i (unsigned arithmetic, so sums
 * wrap alike everywhere); every rank checks every element of every result against the sum it
 * computes itself.  Rank 0 prints "bytes <ITERS * INTS * 4>" and the job ends with
 * "OK allreduce_loop".
 *
 * usage: allreduce_loop [ITERS [INTS]]   (defaults: 8 calls of 262144 ints = 1 MiB)
 */
#include "../c/stormtest.h"

int main(int argc, char **argv)
{
    int rank, size, q;
    long iters = 8, ints = 262144, i, k;
    unsigned *in, *out;

    MPI_Init(&argc, &argv);
    test_begin("allreduce_loop");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1)
        iters = atol(argv[1]);
    if (argc > 2)
        ints = atol(argv[2]);
    CHECK(iters > 0 && ints > 0 && ints <= (1L << 28), "usage: allreduce_loop [ITERS [INTS]]");
    in = (unsigned *)test_malloc(sizeof(unsigned) * (size_t)ints);
    out = (unsigned *)test_malloc(sizeof(unsigned) * (size_t)ints);
    for (i = 0; i < iters; i++) {
        for (k = 0; k < ints; k++)
            in[k] = (unsigned)rank * 1000003u + (unsigned)k + (unsigned)i;
        CHECK_MPI(MPI_Allreduce(in, out, (int)ints, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD));
        for (k = 0; k < ints; k++) {
            unsigned want = 0;
            for (q = 0; q < size; q++)
                want += (unsigned)q * 1000003u + (unsigned)k + (unsigned)i;
            CHECK(out[k] == want, "call %ld element %ld: %u, expected %u", i, k, out[k], want);
        }
    }
    if (rank == 0)
        printf("bytes %ld\n", iters * ints * 4);
    free(in);
    free(out);
    return test_end();
}
