"""What a run measures: activation and APD maps, conduction velocity, biomarkers, the pseudo-ECG and its
leads, end-of-run plausibility checks, and their device-side twins for the resident placement."""
