"""One module per CLI verb; see ``autoscale_data.cli``."""
