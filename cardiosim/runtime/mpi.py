"""MPI helpers every package uses: collectives such as one root-then-all, the launcher."""

from __future__ import annotations
