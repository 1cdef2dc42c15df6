"""Loading the generated libraries and calling their C entry points: ``library`` (finding,
building on demand, opening and status checks), ``gemm`` (the INT8 GEMMs), ``stages``
(the stage kernels) and ``prologue`` (the prologue prototype). Device pointers and streams
are plain integers here."""
