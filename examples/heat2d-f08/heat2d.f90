! heat2d.f90 - examples/heat2d in Fortran 2008 with the mpi_f08 module: steady-state heat
! diffusion on a square plate, solved with Jacobi iteration.
!
! The plate is an N x N grid of interior points with fixed temperatures on its edge: the left
! edge is held at 1.0, the top edge at 0.5, the other two at 0.0. Each Jacobi sweep replaces
! every interior value by the mean of its four neighbours. The grid is split into blocks over
! the ranks (a 2-D process grid by default, or 1-D row strips with -d 1); each sweep begins with
! a halo exchange with the up-to-four neighbours, and every k sweeps the largest change of any
! point (the residual) is combined with MPI_Allreduce(MPI_MAX).
!
! Where the C version copies the left and right columns of its block into buffers, this one
! sends and receives the array sections u(1, 1:nr) and u(0, 1:nr) themselves: with mpi_f08
! a non-contiguous section is a valid buffer (the library describes it with a derived
! datatype). A block is u(0:nc+1, 0:nr+1): column index first, so a grid row is contiguous,
! as in C.
!
! Each point is updated with the same arithmetic in the same order as the C version, so the
! iteration count, the residual and the fixed-point checksum are the same as its.
!
! usage: heat2d [-n N] [-i max_iterations] [-t tolerance] [-k check_every] [-d 1|2]
program heat2d
  use mpi_f08
  implicit none
  integer, parameter :: tag_up = 1, tag_down = 2, tag_left = 3, tag_right = 4
  integer :: rank, nprocs, n, max_iter, check_every, dims, a, nargs
  integer :: px, py, cx, cy, r0, r1, c0, c1, nr, nc, i, j, iter, cur, nxt, gi, gj
  integer :: up, down, left, right
  logical :: converged, check
  double precision :: tol, residual, local_res, t0, t1, local_sum, total
  integer(kind=8) :: local_fix, fix
  double precision, allocatable :: u(:, :, :)
  type(MPI_Request) :: req(8)
  character(len=64) :: arg, val, tol_text, secs, rate

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)

  n = 1024
  max_iter = 1000
  check_every = 10
  dims = 2
  tol = 1d-6
  tol_text = '1e-06'
  nargs = command_argument_count()
  a = 1
  do while (a <= nargs)
    call get_command_argument(a, arg)
    if (a + 1 > nargs) call die('usage: heat2d [-n N] [-i max_iterations] [-t tolerance] ' // &
      '[-k check_every] [-d 1|2]')
    call get_command_argument(a + 1, val)
    select case (arg)
    case ('-n')
      read (val, *) n
    case ('-i')
      read (val, *) max_iter
    case ('-t')
      read (val, *) tol
      tol_text = val
    case ('-k')
      read (val, *) check_every
    case ('-d')
      read (val, *) dims
    case default
      call die('usage: heat2d [-n N] [-i max_iterations] [-t tolerance] [-k check_every] [-d 1|2]')
    end select
    a = a + 2
  end do
  if (n < 1 .or. max_iter < 0 .or. check_every < 1 .or. (dims /= 1 .and. dims /= 2)) &
    call die('bad arguments')

  ! Process grid: px columns x py rows of blocks, as square as the rank count allows.
  px = 1
  if (dims == 2) then
    i = 1
    do while (i * i <= nprocs)
      if (mod(nprocs, i) == 0) px = i
      i = i + 1
    end do
  end if
  py = nprocs / px
  if (py > n .or. px > n) call die('more blocks than grid rows or columns')
  cx = mod(rank, px)
  cy = rank / px
  call split(n, py, cy, r0, r1) ! my global interior rows r0+1 .. r1
  call split(n, px, cx, c0, c1)
  nr = r1 - r0
  nc = c1 - c0
  up = merge(rank - px, MPI_PROC_NULL, cy > 0)
  down = merge(rank + px, MPI_PROC_NULL, cy < py - 1)
  left = merge(rank - 1, MPI_PROC_NULL, cx > 0)
  right = merge(rank + 1, MPI_PROC_NULL, cx < px - 1)

  ! Two copies of the block (u(:, :, cur) is the current field), edges fixed in the halo cells
  ! that lie on the plate's edge.
  allocate (u(0:nc + 1, 0:nr + 1, 2))
  u = 0.0d0
  do i = 0, nr + 1
    do j = 0, nc + 1
      gi = r0 + i
      gj = c0 + j
      if (gi == 0 .or. gi == n + 1 .or. gj == 0 .or. gj == n + 1) u(j, i, :) = edge_value(gi, gj)
    end do
  end do
  cur = 1
  residual = huge(1.0d0)
  converged = .false.

  call MPI_Barrier(MPI_COMM_WORLD)
  t0 = MPI_Wtime()
  iter = 0
  do while (iter < max_iter)
    local_res = 0.0d0
    nxt = 3 - cur

    ! Halo exchange: rows are contiguous, columns are strided sections sent as they are.
    call MPI_Irecv(u(1:nc, 0, cur), nc, MPI_DOUBLE_PRECISION, up, tag_down, MPI_COMM_WORLD, req(1))
    call MPI_Irecv(u(1:nc, nr + 1, cur), nc, MPI_DOUBLE_PRECISION, down, tag_up, MPI_COMM_WORLD, &
      req(2))
    call MPI_Irecv(u(0, 1:nr, cur), nr, MPI_DOUBLE_PRECISION, left, tag_right, MPI_COMM_WORLD, &
      req(3))
    call MPI_Irecv(u(nc + 1, 1:nr, cur), nr, MPI_DOUBLE_PRECISION, right, tag_left, &
      MPI_COMM_WORLD, req(4))
    call MPI_Isend(u(1:nc, 1, cur), nc, MPI_DOUBLE_PRECISION, up, tag_up, MPI_COMM_WORLD, req(5))
    call MPI_Isend(u(1:nc, nr, cur), nc, MPI_DOUBLE_PRECISION, down, tag_down, MPI_COMM_WORLD, &
      req(6))
    call MPI_Isend(u(1, 1:nr, cur), nr, MPI_DOUBLE_PRECISION, left, tag_left, MPI_COMM_WORLD, &
      req(7))
    call MPI_Isend(u(nc, 1:nr, cur), nr, MPI_DOUBLE_PRECISION, right, tag_right, MPI_COMM_WORLD, &
      req(8))
    call MPI_Waitall(8, req, MPI_STATUSES_IGNORE)

    ! Jacobi sweep, summed in the C version's order.
    iter = iter + 1
    check = mod(iter, check_every) == 0 .or. iter == max_iter
    do i = 1, nr
      do j = 1, nc
        u(j, i, nxt) = 0.25d0 * (((u(j, i - 1, cur) + u(j, i + 1, cur)) + u(j - 1, i, cur)) &
          + u(j + 1, i, cur))
      end do
      if (check) then
        do j = 1, nc
          local_res = max(local_res, abs(u(j, i, nxt) - u(j, i, cur)))
        end do
      end if
    end do
    cur = nxt

    if (check) then
      call MPI_Allreduce(local_res, residual, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD)
      if (residual < tol) then
        converged = .true.
        exit
      end if
    end if
  end do
  t1 = MPI_Wtime()

  local_sum = 0.0d0
  local_fix = 0
  do i = 1, nr
    do j = 1, nc
      local_sum = local_sum + u(j, i, cur)
      local_fix = local_fix + nint(scale(u(j, i, cur), 32), kind=8)
    end do
  end do
  call MPI_Allreduce(local_sum, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Allreduce(local_fix, fix, 1, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD)

  if (rank == 0) then
    print '(a, i0, a, i0, a, i0, a, i0, a, i0, a)', 'heat2d: grid ', n, ' x ', n, ', ', nprocs, &
      ' ranks as ', px, ' x ', py, ' blocks'
    print '(a, i0, 5a, i0, a)', 'iterations: ', iter, ' (', &
      trim(merge('converged             ', 'stopped at the maximum', converged)), &
      ', tolerance ', trim(tol_text), ', residual checked every ', check_every, ')'
    print '(2a)', 'residual: ', c_exp(residual, 6)
    print '(2a)', 'checksum: ', c_exp(total, 15)
    print '(a, i0)', 'checksum (fixed-point): ', fix
    write (secs, '(f12.3)') t1 - t0
    write (rate, '(f12.1)') dble(n) * n * iter / (t1 - t0) / 1d6
    print '(5a)', 'time: ', trim(adjustl(secs)), ' s (', trim(adjustl(rate)), &
      ' M point-updates/s)'
  end if

  deallocate (u)
  call MPI_Finalize()

contains

  ! Temperature held on the edge of the plate at global row gi, column gj (0 or N+1).
  pure double precision function edge_value(gi, gj)
    integer, intent(in) :: gi, gj
    if (gj == 0) then
      edge_value = 1.0d0 ! left edge
    else if (gi == 0) then
      edge_value = 0.5d0 ! top edge
    else
      edge_value = 0.0d0 ! right and bottom edges
    end if
  end function edge_value

  ! Split n items into parts pieces; piece p gets [lo, hi).
  pure subroutine split(n, parts, p, lo, hi)
    integer, intent(in) :: n, parts, p
    integer, intent(out) :: lo, hi
    lo = int(int(n, 8) * p / parts)
    hi = int(int(n, 8) * (p + 1) / parts)
  end subroutine split

  ! x as C's printf("%.<digits>e") writes it (1.234567e-05), so both versions print alike.
  function c_exp(x, digits) result(s)
    double precision, intent(in) :: x
    integer, intent(in) :: digits
    character(len=:), allocatable :: s
    character(len=40) :: buf, fmt
    integer :: k
    write (fmt, '(a, i0, a, i0, a)') '(es', digits + 8, '.', digits, 'e2)'
    write (buf, fmt) x
    s = trim(adjustl(buf))
    k = index(s, 'E')
    if (k > 0) s(k:k) = 'e'
  end function c_exp

  subroutine die(msg)
    character(len=*), intent(in) :: msg
    if (rank == 0) write (0, '(2a)') 'heat2d: ', msg
    call MPI_Abort(MPI_COMM_WORLD, 2)
    stop 2
  end subroutine die

end program heat2d
