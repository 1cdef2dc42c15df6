"""Generator: kernel variants, Jinja2 rendering and nvcc builds (installed as ozaki_cutlass.generator)."""
