! MPI_COMM_SPAWN(_MULTIPLE) through the mpi module (see spawn.inc).
program spawn_mpi
  use mpi
  implicit none
  character(len=*), parameter :: tag = 'spawn_mpi'
  integer :: ierr, rank, parent, inter, i, v, failures, codes(2), codes3(3)
  integer :: maxprocs(2), infos(2)
  character(len=16) :: argv(3), arg, argvs(2, 3)
  character(len=512) :: self, cmds(2)
  include 'spawn.inc'
end program spawn_mpi
