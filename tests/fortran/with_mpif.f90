! The Fortran binding through mpif.h (implicit interfaces).
program with_mpif
  implicit none
  include 'mpif.h'
  character(len=*), parameter :: test_name = 'with_mpif'
  include 'checks.inc'
end program with_mpif

include 'procs.inc'
