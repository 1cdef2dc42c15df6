"""The command line (``cli``: ``ozaki-cutlass build``, ``list``, ``demo``, ``accuracy``,
``bench``, ``bench-int8``, ``tune``) and what its commands measure with."""
