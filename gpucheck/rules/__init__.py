"""Rules: pure functions from facts to findings, one module a layer (or two close ones).

A rule reads facts, never the environment or the clock: what it needs of the environment, a probe
records as a fact (``Facts.environment``). The registry (``gpucheck.registry``) lists each layer's rules;
the diagnosis runs them bottom-up. Each rule sees all facts, so a higher layer can tell "broken here" from
"broken because of something lower" and a lower one can use evidence from above (a GPU that CUDA
enumerates is on a bus even where sysfs does not show it).
"""
