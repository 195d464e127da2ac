"""Export of gluon_cf models (installed as gluon_cf.export)."""
