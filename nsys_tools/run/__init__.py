"""The report pipeline: per-file partials and their exact merge, pieces and spill for bounded memory, the engines, bench."""
