"""mpi4py.futures under stormpi: an MPIPoolExecutor (which starts its workers with
MPI_Comm_spawn) maps a function over 100 inputs, and the results come back in order.

Run under a launcher, e.g. `stormrun -n 1 python tests/mpi4py/futures_map.py`; prints
"OK futures_map" when every result is right, else fails with the first wrong one.
"""

import sys

from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor


def cube(x):
    return x * x * x, MPI.COMM_WORLD.Get_rank()


def main():
    with MPIPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(cube, range(100)))
    values = [v for v, _ in results]
    workers = {w for _, w in results}
    expect = [x * x * x for x in range(100)]
    if values != expect:
        bad = next(i for i, (a, b) in enumerate(zip(values, expect)) if a != b)
        sys.exit(f"FAIL futures_map: input {bad} gave {values[bad]}, not {expect[bad]}")
    if not workers <= {0, 1}:
        sys.exit(f"FAIL futures_map: results from workers {sorted(workers)}, not ranks of 2")
    print("OK futures_map", flush=True)


if __name__ == "__main__":
    main()
