"""Model backends, one sub-package per capability."""
