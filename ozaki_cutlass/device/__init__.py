"""The GPU underneath the runtime: the CUDA driver (``driver``), which arch is visible
(``arch``), the device matrices the runtime accepts and returns (``arrays``), their
layouts as cuBLAS calls (``layouts``) and native DGEMM through cuBLASLt (``cublas``).
Nothing here knows about the emulation."""
