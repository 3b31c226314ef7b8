"""Where the tissue is: the DMDA grid, the tissue mask, the domain decomposition balanced by tissue nodes,
anatomies (the built-in ventricles, meshes) and fibres."""
