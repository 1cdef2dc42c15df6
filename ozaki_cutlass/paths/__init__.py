"""The ways one GEMM call runs on the GPU, each taking a ``launch.Launch``: the emulation's
``staged``, ``fused`` and ``prologue`` paths (with their shared ``scale`` stage), and
``native`` DGEMM (with its ``fast_lane``)."""
