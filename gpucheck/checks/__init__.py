"""The built-in suite: pytest checks that only assert on findings (collected by gpucheck itself)."""
