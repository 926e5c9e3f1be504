"""One module per CLI verb; see ``autoscale_data.cli``."""
__all__: list[str] = []
