/*
 * bad_args.c - arguments MPI_Init's caller gets wrong, which must come back as errors (with
 * MPI_ERRORS_RETURN) and never as a wrong success:
 *   a datatype of 2^63 or 2^65 bytes (contiguous and vector over a 2^62-byte type)
 *   MPI_Pack / MPI_Unpack at a negative position
 *   MPI_Allreduce and MPI_Reduce (at the root) with one buffer as input and output
 * (MPICH returns MPI_ERR_BUFFER for the last; Open MPI does not check it, so this program is
 * stormpi's own and not run against the reference MPIs.)  Prints "OK bad_args" on rank 0.
 */
#include <mpi.h>
#include <stdio.h>

static int failures, rank;

static void refused(int rc, const char *what)
{
    if (rc == MPI_SUCCESS) {
        fprintf(stderr, "FAIL bad_args: rank %d: %s succeeded\n", rank, what);
        failures++;
    }
}

static void refused_as(int rc, int want, const char *what)
{
    int cls = -1;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls != want) {
        fprintf(stderr, "FAIL bad_args: rank %d: %s gave class %d, not %d\n", rank, what, cls,
                want);
        failures++;
    }
}

int main(int argc, char **argv)
{
    MPI_Datatype t33, t62, big;
    MPI_Count size = -1;
    char packed[64];
    int pos, value = 1, buf[4] = {1, 2, 3, 4}, any;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    /* 2^33 and 2^62 bytes are fine; twice and eight times 2^62 are not. */
    if (MPI_Type_contiguous(1 << 30, MPI_DOUBLE, &t33) != MPI_SUCCESS ||
        MPI_Type_contiguous(1 << 29, t33, &t62) != MPI_SUCCESS ||
        MPI_Type_size_x(t62, &size) != MPI_SUCCESS || size != (MPI_Count)1 << 62) {
        fprintf(stderr, "FAIL bad_args: rank %d: a 2^62-byte type has size %lld\n", rank,
                (long long)size);
        failures++;
    }
    big = MPI_DATATYPE_NULL;
    refused(MPI_Type_contiguous(2, t62, &big), "MPI_Type_contiguous of 2^63 bytes");
    refused(MPI_Type_contiguous(8, t62, &big), "MPI_Type_contiguous of 2^65 bytes");
    refused(MPI_Type_vector(8, 1, 1, t62, &big), "MPI_Type_vector of 2^65 bytes");
    refused(MPI_Type_vector(2, 1, 1 << 30, t62, &big), "MPI_Type_vector with a 2^92-byte stride");
    if (big != MPI_DATATYPE_NULL) {
        fprintf(stderr, "FAIL bad_args: rank %d: a refused constructor made a type\n", rank);
        failures++;
    }

    pos = -1;
    refused_as(MPI_Pack(&value, 1, MPI_INT, packed, sizeof packed, &pos, MPI_COMM_WORLD),
               MPI_ERR_ARG, "MPI_Pack at position -1");
    pos = -8;
    refused_as(MPI_Unpack(packed, sizeof packed, &pos, &value, 1, MPI_INT, MPI_COMM_WORLD),
               MPI_ERR_ARG, "MPI_Unpack at position -8");

    refused_as(MPI_Allreduce(buf, buf, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER,
               "MPI_Allreduce with sendbuf == recvbuf");
    if (rank == 0)
        refused_as(MPI_Reduce(buf, buf, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER,
                   "MPI_Reduce at the root with sendbuf == recvbuf");
    /* The same calls done right still work, and nothing above left a half-done collective. */
    if (MPI_Allreduce(MPI_IN_PLACE, buf, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "FAIL bad_args: rank %d: MPI_Allreduce in place failed\n", rank);
        failures++;
    }
    MPI_Type_free(&t62);
    MPI_Type_free(&t33);

    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any == 0 && rank == 0)
        printf("OK bad_args\n");
    MPI_Finalize();
    return failures ? 1 : 0;
}
