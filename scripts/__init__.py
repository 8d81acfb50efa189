"""Developer scripts run from the repository (``python -m scripts.cluster``)."""
