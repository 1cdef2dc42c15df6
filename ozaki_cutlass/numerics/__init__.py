"""The arithmetic of the scheme, exact and GPU-free: moduli and CRT constants
(``moduli``), and exact products and error measures for checking results (``accuracy``).
The NumPy reference of the whole algorithm is ``ozaki_cutlass.reference``."""
