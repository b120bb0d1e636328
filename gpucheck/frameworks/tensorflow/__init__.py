"""TensorFlow, a framework unit: its child (the framework facts, a shared set-up, then one step per question of the
layers above), the CUDA libraries its build needs, its memory settings, its rules and checks, its benchmarks and its
collective. ``units.FRAMEWORK`` is what the registry lists (``gpucheck.frameworks.BUILT_IN``); nothing outside this
package imports its modules. This file imports nothing: every probe child of the unit imports the package first, and
its time is the time to verdict.
"""
