"""The time loop that ties the packages together, and sweeps: many runs of one config and one table."""
