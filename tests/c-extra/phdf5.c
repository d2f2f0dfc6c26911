/* Parallel HDF5 on MPI-IO: a 3-D dataset written collectively by hyperslabs (a slab of the
 * first dimension per rank), a 1-D dataset written independently, an attribute; the file is
 * closed, reopened read-only and read back in another decomposition (a slab of the second
 * dimension per rank), checked element by element. Build with h5pcc (MPICH flavour).
 * Usage: phdf5 FILE */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define NX 8
#define NY 12
#define NZ 5
#define PER 100 /* ints per rank in the independent dataset */

#define FAIL(...)                                                      \
    do {                                                               \
        fprintf(stderr, "FAIL phdf5: rank %d: ", rank);                \
        fprintf(stderr, __VA_ARGS__);                                  \
        fprintf(stderr, " (line %d)\n", __LINE__);                     \
        MPI_Abort(MPI_COMM_WORLD, 1);                                  \
    } while (0)
#define HOK(x)                                                     \
    do {                                                               \
        if ((x) < 0)                                                   \
            FAIL("%s failed", #x);                                     \
    } while (0)

static int value(int x, int y, int z) { return x * 1000 + y * 10 + z; }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2)
        FAIL("usage: phdf5 FILE");
    if (NX % size || NY % size)
        FAIL("run with 1, 2 or 4 ranks");

    /* Write. */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    HOK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    HOK(file);
    hsize_t dims[3] = {NX, NY, NZ};
    hid_t space = H5Screate_simple(3, dims, NULL);
    hid_t dset = H5Dcreate2(file, "grid", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    HOK(dset);
    int nx = NX / size;
    hsize_t start[3] = {(hsize_t)(rank * nx), 0, 0}, count[3] = {(hsize_t)nx, NY, NZ};
    HOK(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mem = H5Screate_simple(3, count, NULL);
    int *slab = malloc(sizeof(int) * nx * NY * NZ);
    for (int x = 0; x < nx; x++)
        for (int y = 0; y < NY; y++)
            for (int z = 0; z < NZ; z++)
                slab[(x * NY + y) * NZ + z] = value(rank * nx + x, y, z);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    HOK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));
    HOK(H5Dwrite(dset, H5T_NATIVE_INT, mem, space, xfer, slab));

    int ranks = size;
    hid_t aspace = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(dset, "ranks", H5T_NATIVE_INT, aspace, H5P_DEFAULT, H5P_DEFAULT);
    HOK(attr);
    HOK(H5Awrite(attr, H5T_NATIVE_INT, &ranks));
    H5Aclose(attr);
    H5Sclose(aspace);

    hsize_t n1 = (hsize_t)PER * size;
    hid_t space1 = H5Screate_simple(1, &n1, NULL);
    hid_t dset1 = H5Dcreate2(file, "independent", H5T_NATIVE_INT, space1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    HOK(dset1);
    hsize_t s1 = (hsize_t)PER * rank, c1 = PER;
    HOK(H5Sselect_hyperslab(space1, H5S_SELECT_SET, &s1, NULL, &c1, NULL));
    hid_t mem1 = H5Screate_simple(1, &c1, NULL);
    int line[PER];
    for (int i = 0; i < PER; i++)
        line[i] = rank * PER + i;
    hid_t ind = H5Pcreate(H5P_DATASET_XFER);
    HOK(H5Pset_dxpl_mpio(ind, H5FD_MPIO_INDEPENDENT));
    HOK(H5Dwrite(dset1, H5T_NATIVE_INT, mem1, space1, ind, line));
    H5Dclose(dset1);
    H5Sclose(mem1);
    H5Sclose(space1);
    H5Dclose(dset);
    H5Sclose(mem);
    H5Sclose(space);
    HOK(H5Fclose(file));

    /* Read back in another decomposition. */
    file = H5Fopen(argv[1], H5F_ACC_RDONLY, fapl);
    HOK(file);
    dset = H5Dopen2(file, "grid", H5P_DEFAULT);
    HOK(dset);
    space = H5Dget_space(dset);
    int ny = NY / size;
    hsize_t rs[3] = {0, (hsize_t)(rank * ny), 0}, rc[3] = {NX, (hsize_t)ny, NZ};
    HOK(H5Sselect_hyperslab(space, H5S_SELECT_SET, rs, NULL, rc, NULL));
    mem = H5Screate_simple(3, rc, NULL);
    int *got = malloc(sizeof(int) * NX * ny * NZ);
    HOK(H5Dread(dset, H5T_NATIVE_INT, mem, space, xfer, got));
    for (int x = 0; x < NX; x++)
        for (int y = 0; y < ny; y++)
            for (int z = 0; z < NZ; z++) {
                int v = got[(x * ny + y) * NZ + z];
                if (v != value(x, rank * ny + y, z))
                    FAIL("grid(%d,%d,%d) is %d", x, rank * ny + y, z, v);
            }
    attr = H5Aopen(dset, "ranks", H5P_DEFAULT);
    int r = -1;
    HOK(H5Aread(attr, H5T_NATIVE_INT, &r));
    if (r != size)
        FAIL("attribute ranks is %d", r);
    H5Aclose(attr);
    dset1 = H5Dopen2(file, "independent", H5P_DEFAULT);
    int *all = malloc(sizeof(int) * PER * size);
    HOK(H5Dread(dset1, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, ind, all));
    for (int i = 0; i < PER * size; i++)
        if (all[i] != i)
            FAIL("independent[%d] is %d", i, all[i]);
    H5Dclose(dset1);
    H5Dclose(dset);
    H5Sclose(mem);
    H5Sclose(space);
    H5Pclose(xfer);
    H5Pclose(ind);
    H5Fclose(file);
    H5Pclose(fapl);
    free(slab);
    free(got);
    free(all);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("OK phdf5\n");
    MPI_Finalize();
    return 0;
}
