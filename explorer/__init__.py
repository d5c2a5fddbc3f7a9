"""The Qt desktop explorer: canvases, inspector, timeline and main window over :mod:`predictors`."""
