"""Predictions against measurements: measured rows (`measurements`), errors (`compare`), the fit of
every fitted constant (`fit`), whole-training reality checks (`reality`), the Transformer Engine
GEMM profile (`te_profile`) and plots (`plots`)."""
