! MPI-IO through the mpi_f08 module: TYPE(MPI_File), optional ierror, TYPE(MPI_Status) out of
! reads, a view by rank written collectively from a non-contiguous array section, the whole file
! read back and checked, the own part read through the view into a section, split-collective
! and nonblocking forms (the split end takes the section too: only its address matters), the
! strings of MPI_File_get_view, MPI_FILE_NULL after closing.
! The file's path is the first argument; each rank prints `fortran checks passed on rank R`,
! rank 0 then `OK io_f08`.
program io_f08
  use mpi_f08
  implicit none
  integer, parameter :: nb = 3, bl = 2, mine = nb * bl
  integer :: ierr, rank, nprocs, i, p, owner, count, cls
  type(MPI_File) :: fh, fh2
  type(MPI_Datatype) :: ftype, etype, ftype2
  type(MPI_Request) :: req
  type(MPI_Status) :: status
  type(MPI_Group) :: group
  integer :: src(2 * mine), got(2 * mine)
  integer, allocatable :: whole(:)
  integer(kind=MPI_OFFSET_KIND) :: disp, disp2, size
  character(len=512) :: fname
  character(len=MPI_MAX_DATAREP_STRING) :: datarep
  logical :: flag

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  call get_command_argument(1, fname)
  call expect(len_trim(fname) > 0, 'a file name argument')

  call MPI_File_open(MPI_COMM_WORLD, trim(fname) // '.none', MPI_MODE_RDONLY, MPI_INFO_NULL, &
                     fh2, ierr)
  call MPI_Error_class(ierr, cls)
  call expect(cls == MPI_ERR_NO_SUCH_FILE, 'MPI_ERR_NO_SUCH_FILE through ierror')

  call MPI_File_open(MPI_COMM_WORLD, fname, ior(MPI_MODE_CREATE, MPI_MODE_WRONLY), &
                     MPI_INFO_NULL, fh)
  call expect(fh /= MPI_FILE_NULL, 'MPI_File_open gives a handle')
  call MPI_File_get_group(fh, group)
  call MPI_Group_size(group, i)
  call expect(i == nprocs, 'MPI_File_get_group')
  call MPI_Group_free(group)
  call MPI_File_set_size(fh, 0_MPI_OFFSET_KIND)

  call MPI_Type_vector(nb, bl, bl * nprocs, MPI_INTEGER, ftype)
  call MPI_Type_commit(ftype)
  disp = int(rank * bl * 4, MPI_OFFSET_KIND)
  call MPI_File_set_view(fh, disp, MPI_INTEGER, ftype, 'native', MPI_INFO_NULL, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_File_set_view')
  call MPI_File_get_view(fh, disp2, etype, ftype2, datarep)
  call expect(disp2 == disp .and. etype == MPI_INTEGER, 'MPI_File_get_view')
  call expect(datarep == 'native' .and. len_trim(datarep) == 6, 'MPI_File_get_view datarep')
  call MPI_Type_free(ftype2)

  ! The values sit at the odd places of src: src(1:2*mine:2) is a section.
  src = -7
  do i = 1, mine
    src(2 * i - 1) = value_at(rank, i - 1)
  end do
  call MPI_File_write_all(fh, src(1:2 * mine:2), mine, MPI_INTEGER, status, ierr)
  call expect(ierr == MPI_SUCCESS, 'MPI_File_write_all of a section')
  call MPI_Get_count(status, MPI_INTEGER, count)
  call expect(count == mine, 'status of MPI_File_write_all')
  call MPI_File_close(fh)
  call expect(fh == MPI_FILE_NULL, 'MPI_File_close sets MPI_FILE_NULL')

  call MPI_File_open(MPI_COMM_WORLD, fname, MPI_MODE_RDONLY, MPI_INFO_NULL, fh)
  call MPI_File_get_size(fh, size)
  call expect(size == int(mine * nprocs * 4, MPI_OFFSET_KIND), 'MPI_File_get_size')
  allocate (whole(mine * nprocs))
  whole = -1
  call MPI_File_read_at_all(fh, 0_MPI_OFFSET_KIND, whole, mine * nprocs, MPI_INTEGER, status)
  call MPI_Get_count(status, MPI_INTEGER, count)
  call expect(count == mine * nprocs, 'MPI_File_read_at_all count')
  do p = 0, mine * nprocs - 1
    owner = mod(p / bl, nprocs)
    call expect(whole(p + 1) == value_at(owner, (p / (bl * nprocs)) * bl + mod(p, bl)), &
                'the file holds every rank''s blocks in place')
  end do

  ! The own part through the view into the even places of got (a section), split-collective.
  call MPI_File_set_view(fh, disp, MPI_INTEGER, ftype, 'native', MPI_INFO_NULL)
  got = -1
  call MPI_File_read_all_begin(fh, got(2:2 * mine:2), mine, MPI_INTEGER)
  call MPI_File_read_all_end(fh, got(2:2 * mine:2), status)
  call MPI_Get_count(status, MPI_INTEGER, count)
  call expect(count == mine, 'MPI_File_read_all_end status')
  call expect(all(got(2:2 * mine:2) == src(1:2 * mine:2)) .and. all(got(1:2 * mine:2) == -1), &
              'read through the view into a section')

  ! Nonblocking, with the individual file pointer.
  call MPI_File_seek(fh, 1_MPI_OFFSET_KIND, MPI_SEEK_SET)
  got = -1
  call MPI_File_iread(fh, got, mine - 1, MPI_INTEGER, req)
  call MPI_Wait(req, status)
  call MPI_Get_count(status, MPI_INTEGER, count)
  call expect(count == mine - 1 .and. all(got(1:mine - 1) == src(3:2 * mine:2)), &
              'MPI_File_iread from the 2nd etype')
  call MPI_File_get_atomicity(fh, flag)
  call expect(.not. flag, 'MPI_File_get_atomicity')
  call MPI_File_close(fh)
  call MPI_Type_free(ftype)

  call MPI_Barrier(MPI_COMM_WORLD)
  if (rank == 0) call MPI_File_delete(fname, MPI_INFO_NULL)
  call MPI_Finalize()
  print '(a,i0,a,i0)', 'fortran checks passed on rank ', rank, ' of ', nprocs
  if (rank == 0) print '(a)', 'OK io_f08'

contains

  integer function value_at(r, k)
    integer, intent(in) :: r, k
    value_at = 1000 * (r + 1) + k
  end function value_at

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a, i0, 2a)', 'FAILED on rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
      stop 1
    end if
  end subroutine expect
end program io_f08
