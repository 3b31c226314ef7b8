"""One paced cell (integrators, pre-pacing, restitution, drug block) and populations of cells, each with its
own parameters."""
