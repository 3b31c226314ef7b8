"""The tissue equations: the discrete operators (stencils, assembled once), the monodomain and bidomain
systems and their solves, and the microscopic model."""
