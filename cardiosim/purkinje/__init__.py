"""The cardiac conduction system: a Purkinje network coupled to the ventricles.

network.py (the graph, its files), grow.py (fractal trees grown on endocardial surfaces), cable.py (the monodomain
cable on the graph, with its cells), coupling.py (the Purkinje–myocardial junctions). It imports runtime, cells,
the reaction's ODE backends and domain; of the rest, only simulation/ and config/ import it.
"""
