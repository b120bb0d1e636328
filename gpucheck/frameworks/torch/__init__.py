"""PyTorch, a framework unit: its child (``import torch`` and what torch says of its build and its GPUs, without
running a kernel), its rules for the compatibility and framework layers, its checks and its view. ``units.FRAMEWORK``
is what the registry lists (``gpucheck.frameworks.BUILT_IN``); nothing outside this package imports its modules.
This file imports nothing: every probe child of the unit imports the package first.
"""
