"""The operands of an emulated product: one operand's own stages (``stages``), shared by
every call and by ``prepare`` (``prepared``: an operand quantized once for many calls)."""
