"""What a run leaves behind: the HDF5 writer, checkpoints, the XDMF sidecar, reading results back and
plotting them."""
