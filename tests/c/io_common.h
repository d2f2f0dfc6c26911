/* Helpers shared by the io_* programs: a per-job scratch file name agreed by all ranks. */
#ifndef IO_COMMON_H
#define IO_COMMON_H

#include <unistd.h>

/* A fresh file name under $TMPDIR (or /tmp), the same at every rank of comm. */
static inline void io_path(char *out, size_t cap, const char *tag)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(out, cap, "%s/stormtest-%s-%ld", dir && *dir ? dir : "/tmp", tag, (long)getpid());
    }
    MPI_Bcast(out, (int)cap, MPI_CHAR, 0, MPI_COMM_WORLD);
}

#endif
