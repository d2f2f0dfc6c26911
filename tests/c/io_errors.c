/* MPI-IO errors: the default file error handler returns codes (MPI_ERRORS_RETURN), with the
 * standard's classes: a missing file, a bad access mode, an exclusive create of an existing
 * file, writing a read-only file, reading a write-only one, a bad handle; file error handlers
 * (create/set/get/call) and MPI_FILE_NULL's handler for opens. */
#include <mpi.h>
#include "stormtest.h"
#include "io_common.h"

static int calls = 0, last_code = 0;

static void on_error(MPI_File *fh, int *code, ...)
{
    (void)fh;
    calls++;
    last_code = *code;
}

static int class_of(int rc)
{
    int c;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_begin("io_errors");
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[256], missing[300];
    io_path(path, sizeof path, "io_errors");
    snprintf(missing, sizeof missing, "%s.does-not-exist", path);

    MPI_Errhandler eh;
    CHECK_MPI(MPI_File_get_errhandler(MPI_FILE_NULL, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_FILE_NULL's handler is not MPI_ERRORS_RETURN");

    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_NO_SUCH_FILE, "open of a missing file: class %d", class_of(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_AMODE, "RDONLY|CREATE: class %d", class_of(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_AMODE, "RDWR|WRONLY: class %d", class_of(rc));

    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL, &fh));
    MPI_Status st;
    int x = rank;
    CHECK_MPI(MPI_File_write_at(fh, rank * sizeof(int), &x, 1, MPI_INT, &st));
    rc = MPI_File_read_at(fh, 0, &x, 1, MPI_INT, &st);
    CHECK(class_of(rc) == MPI_ERR_ACCESS, "reading a WRONLY file: class %d", class_of(rc));
    rc = MPI_File_write_at(fh, -4, &x, 1, MPI_INT, &st);
    CHECK(rc != MPI_SUCCESS, "a negative offset was accepted");
    rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external64", MPI_INFO_NULL);
    CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_DATAREP, "unknown datarep: class %d", class_of(rc));
    CHECK_MPI(MPI_File_close(&fh));

    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_FILE_EXISTS, "exclusive create of an existing file: class %d", class_of(rc));

    /* Members disagreeing on the mode, or one with a bad mode: all fail alike, none hangs. */
    rc = MPI_File_open(MPI_COMM_WORLD, path, rank ? MPI_MODE_RDONLY : MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_NOT_SAME, "different modes: class %d", class_of(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, rank ? MPI_MODE_RDONLY : 0, MPI_INFO_NULL, &fh);
    CHECK(class_of(rc) == MPI_ERR_AMODE, "one member's bad mode: class %d", class_of(rc));

    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    rc = MPI_File_write_at(fh, 0, &x, 1, MPI_INT, &st);
    CHECK(class_of(rc) == MPI_ERR_READ_ONLY, "writing a RDONLY file: class %d", class_of(rc));

    /* A user handler on the file is called with the code. */
    MPI_Errhandler mine;
    CHECK_MPI(MPI_File_create_errhandler(on_error, &mine));
    CHECK_MPI(MPI_File_set_errhandler(fh, mine));
    rc = MPI_File_write_at(fh, 0, &x, 1, MPI_INT, &st);
    CHECK(calls == 1 && last_code == rc && class_of(rc) == MPI_ERR_READ_ONLY, "user handler: %d calls, code %d", calls, last_code);
    CHECK_MPI(MPI_File_call_errhandler(fh, MPI_ERR_IO));
    CHECK(calls == 2 && last_code == MPI_ERR_IO, "call_errhandler: %d calls, code %d", calls, last_code);
    MPI_Errhandler got;
    CHECK_MPI(MPI_File_get_errhandler(fh, &got));
    MPI_Errhandler_free(&got);
    int y = -1;
    CHECK_MPI(MPI_File_read_at(fh, rank * sizeof(int), &y, 1, MPI_INT, &st));
    CHECK(y == rank, "read back %d", y);
    MPI_File saved = fh;
    CHECK_MPI(MPI_File_close(&fh));
    MPI_Offset sz;
    rc = MPI_File_get_size(saved, &sz);
    CHECK(class_of(rc) == MPI_ERR_FILE, "a closed file's handle: class %d", class_of(rc));

    /* MPI_FILE_NULL's handler governs opens. */
    CHECK_MPI(MPI_File_set_errhandler(MPI_FILE_NULL, mine));
    rc = MPI_File_open(MPI_COMM_WORLD, missing, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(calls == 3 && class_of(rc) == MPI_ERR_NO_SUCH_FILE, "open with a user handler: %d calls", calls);
    CHECK_MPI(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));
    MPI_Errhandler_free(&mine);

    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK_MPI(MPI_File_delete(path, MPI_INFO_NULL));
        rc = MPI_File_delete(path, MPI_INFO_NULL);
        CHECK(class_of(rc) == MPI_ERR_NO_SUCH_FILE, "deleting a missing file: class %d", class_of(rc));
    }
    return test_end();
}
