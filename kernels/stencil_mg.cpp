/* Geometric multigrid and conjugate gradients for a matrix on a structured grid (cardiosim.solvers), on one MPI rank
 * or on several, one source, two builds:
 *
 *   mpicxx-flags g++ -x c++ -O2 -shared -fPIC             every loop runs on the host (CI; the GPU build's reference)
 *   nvcc -x cu --extended-lambda -shared -cudart shared   every loop is a kernel on the legacy default stream, the
 *                                                         stream PETSc's CUDA vectors use: a call needs no
 *                                                         synchronisation with PETSc's own operations
 *
 * Why our own and not PETSc's PCMG/KSPCG on the GPU: their V-cycle and CG iteration are a few hundred PETSc
 * operations per iteration, each ~15 µs of host latency on an H100 (docs/decisions/0017-own-stencil-cg-and-multigrid.md): latency, not bandwidth, set
 * the cost. Here a V-cycle is a few dozen kernel launches issued from C, and a CG iteration has one host
 * synchronisation.
 *
 * Each rank holds its part of every level as a box of owned nodes with one layer of ghost nodes around it (in the
 * dimensions the grid has): vectors are stored ghosted, the operator as stencil coefficients S[s*size + t] over the
 * owned nodes t, s over the 3^d neighbours ((di+1) + 3(dj+1) + 9(dk+1)), zero where a neighbour is outside the grid.
 * Ghosts on the grid's boundary stay zero, so a stencil product needs no bounds test. One rank's box is the whole
 * grid (the serial solver).
 *
 * The communication seam (one place: stencil_mg/seam.inc): halo exchange of one level's vector (dimension by
 * dimension, so edges and corners arrive too), the global sum of a CG iteration's scalars (one MPI_Allreduce), and
 * gather/scatter of one level onto rank 0 for the coarse levels (agglomeration: a V-cycle of a serial hierarchy on
 * rank 0, built by the host code from the gathered coarse operator). Transports: host-staged MPI (pack on the device,
 * copy only the packed faces, MPI, copy back, unpack; the CPU build does the same without copies), or CUDA IPC
 * between the ranks of a node, ordered on the device alone (flags raised by the writing kernel in the reader's
 * memory: "The CUDA IPC transport" in seam.inc), which lets the V-cycle over the ranks be one CUDA graph.
 *
 * Smoother: multicolour SOR with 2^d colours by index parity, so no two neighbours share a colour and each colour is
 * one parallel loop; on several ranks the ghosts are exchanged after each colour, so the sweep is the serial one.
 * A forward sweep before and a backward sweep after the coarse correction, with R = Pᵀ and an exact (pseudo-)inverse
 * on the coarsest level, make the V-cycle a symmetric operator: a valid preconditioner for CG.
 *
 * Masked grids (tissue in a box): the layout, the halo and the transfers stay the box's, and every per-node loop
 * visits a level's active nodes only, through a list ("Active nodes" in stencil_mg/levels.inc; smg_active).
 *
 * Grid index of owned node (i, j, k): i + nx (j + ny k); 2D grids have nz = 1.
 */
/* One translation unit in fragments by phase, included below in this order from stencil_mg/ (as hypre's struct_ls
 * splits PFMG into pfmg.c, pfmg_setup.c, pfmg_relax.c, pfmg_solve.c). One unit, not objects linked together: the
 * GPU build is nvcc's whole-program compilation (no -rdc), where a kernel, the __device__ functions and the
 * templates it instantiates (each, reduce and their lambdas) must be in the unit that launches it, and every phase
 * shares the file-static launch state (stream_now, block_size) and the inlined stencil product. The fragments are
 * .inc, not headers: each is valid only at its place in this order (it uses what the ones before it define), and
 * nothing else includes them. The build hash covers every file named in an #include "..." line here
 * (cardiosim.solvers.multigrid.source_digest); the package data lists the folder (setup.cfg). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
/* the C API only: Open MPI's and MPICH's headers otherwise pull in the C++ bindings, which -lmpi does not link */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <chrono>

#include "stencil_mg/platform.inc"
#include "stencil_mg/levels.inc"
#include "stencil_mg/layouts.inc"
#include "stencil_mg/smoothers.inc"
#include "stencil_mg/transfers.inc"
using namespace smg;        /* the names of the fragments above, for the rest of the unit */
#include "stencil_mg/seam.inc"
#include "stencil_mg/vcycle.inc"
#include "stencil_mg/setup.inc"
#include "stencil_mg/apply.inc"
#include "stencil_mg/cg.inc"
#include "stencil_mg/tuning.inc"
#include "stencil_mg/destroy.inc"
