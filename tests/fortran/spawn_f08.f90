! MPI_COMM_SPAWN(_MULTIPLE) through the mpi_f08 module (see spawn.inc).
program spawn_f08
  use mpi_f08
  implicit none
  character(len=*), parameter :: tag = 'spawn_f08'
  integer :: ierr, rank, i, v, failures, codes(2), codes3(3)
  type(MPI_Comm) :: parent, inter
  integer :: maxprocs(2)
  type(MPI_Info) :: infos(2)
  character(len=16) :: argv(3), arg, argvs(2, 3)
  character(len=512) :: self, cmds(2)
  include 'spawn.inc'
end program spawn_f08
