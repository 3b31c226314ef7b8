import sys

from cardiosim.runtime.threads import one_thread_per_rank

one_thread_per_rank()            # before anything loads NumPy or PETSc (cardiosim.runtime.threads)

from cardiosim.cli import main  # noqa: E402  (after the thread count is set)

sys.exit(main())
