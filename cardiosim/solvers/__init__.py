"""The PDE side's linear solvers.

  linear        LinearSolver: a PETSc KSP per system (parabolic_, elliptic_ prefixes), defaults in code and the
                command line last; which solver each placement gets
  krylov        StencilCG: conjugate gradients with the whole iteration in kernels/stencil_mg.cpp (KSP type python)
  multigrid     StencilMG: geometric multigrid on the grid's stencil, the V-cycle in one C call (PC type python)
  coloured_icc  ColouredICC: IC(0) of the colour-ordered matrix (PC type python)
  nullspace     a singular system's null space as StencilCG takes it (projected on the device, not by KSPSolve)
  comm          the one communication seam of the stencil solvers on several ranks: halo exchange, reductions,
                the coarse sub-communicator, and the table of transports

Nothing here imports the cell side (cardiosim.reaction): GPU and compile helpers come from cardiosim.runtime.gpu and
cardiosim.runtime.compile, the floor both sides stand on.
"""
