! User data representations with Fortran callbacks through the mpi module (datarep.inc).
program datarep_mpi
  use mpi
  implicit none
  character(len=*), parameter :: test_name = 'datarep_mpi'
  include 'datarep.inc'
end program datarep_mpi

include 'datarep_cb.inc'
