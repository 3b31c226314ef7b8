"""A paced cell's state as the start of a tissue run (``cell.initial_state``): the last sample of every state in the
HDF5 file of a ``cardiosim cell`` run (cardiosim/single_cell/pacing.py writes ``/trace/<state>`` for every state, the last
sample at the end of the last beat, so after ``--prepace N --beats 1`` it is the state N + 1 beats of pacing reach).

Read by the config's validation (one line naming the key and what is wrong) and by the reaction step."""

from __future__ import annotations

from pathlib import Path

from cardiosim.cells.base import CellModelError


def read(path, model_name: str, state_names) -> dict[str, float]:
    """{state: value} from the cell file ``path`` for the model ``model_name`` (its registry name, or a CellML file's
    stem); CellModelError (one line) where the file is not a cardiosim cell file, is of another model or lacks a
    state."""
    import h5py
    p = Path(path)
    try:
        with h5py.File(p, "r") as f:
            if "trace" not in f or "model" not in f.attrs or "cardiosim_version" not in f.attrs:
                raise CellModelError(f"cell.initial_state: {p} is not the output of `cardiosim cell` (no /trace)")
            model = f.attrs["model"]
            model = model.decode() if isinstance(model, bytes) else str(model)
            if model != Path(model_name).stem:
                raise CellModelError(f"cell.initial_state: {p} paced the model '{model}', this run's is "
                                     f"'{Path(model_name).stem}'")
            missing = [n for n in state_names if n not in f["trace"]]
            if missing:
                raise CellModelError(f"cell.initial_state: {p} has no trace of the state(s) {', '.join(missing)}")
            return {n: float(f["trace"][n][-1]) for n in state_names}
    except OSError as e:
        raise CellModelError(f"cell.initial_state: cannot read {p} as HDF5 ({str(e).splitlines()[0]})") from None
