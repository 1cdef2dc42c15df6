# Sourced by the device scripts: install the carried nvidia-cutlass wheel and this checkout
# into the machine's python3 (no package registry there) and set OUT and PY.
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
PY=python3
$PY -m pip install -q --no-index --no-deps --no-build-isolation .whl/*.whl -e . >/tmp/ozaki-install.log 2>&1 \
  || { tail -20 /tmp/ozaki-install.log; exit 1; }
