! MPI_SIZEOF through the mpi module: the storage size of one element, for scalars and arrays
! of several intrinsic types and kinds (ierror required there).
program sizeof_mpi
  use mpi
  implicit none
  integer :: ierr, s, rank
  integer(kind=8) :: big(3)
  real(kind=8) :: d
  real :: r(2, 2)
  complex :: z
  logical(kind=1) :: l1
  integer(kind=2) :: i2

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call check(big, 8)
  call MPI_SIZEOF(d, s, ierr)
  if (s /= 8 .or. ierr /= MPI_SUCCESS) call fail('REAL(8)')
  call MPI_SIZEOF(r, s, ierr)
  if (s /= 4) call fail('REAL array')
  call MPI_SIZEOF(z, s, ierr)
  if (s /= 8) call fail('COMPLEX')
  call MPI_SIZEOF(l1, s, ierr)
  if (s /= 1) call fail('LOGICAL(1)')
  call MPI_SIZEOF(i2, s, ierr)
  if (s /= 2) call fail('INTEGER(2)')
  print '(a, i0)', 'fortran checks passed on rank ', rank
  if (rank == 0) print '(a)', 'OK sizeof_mpi'
  call MPI_FINALIZE(ierr)
contains
  subroutine check(x, want)
    integer(kind=8), intent(in) :: x(:)
    integer, intent(in) :: want
    call MPI_SIZEOF(x, s, ierr)
    if (s /= want) call fail('INTEGER(8) array')
  end subroutine check
  subroutine fail(what)
    character(len=*), intent(in) :: what
    print '(2a)', 'FAILED: MPI_SIZEOF of ', what
    stop 1
  end subroutine fail
end program sizeof_mpi
