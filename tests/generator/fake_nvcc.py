"""A stand-in for nvcc in tests: no CUDA, instant, and it keeps a log of its calls.

Installed by the tests as an executable named `nvcc` next to `nvcc.json`, its
configuration: {"version": str, "fail": str, "fail_if": str, "sleep": float,
"calls": path}. `--version` prints the version; a compile appends one JSON line (argv,
cwd, pid, times) to the calls file, sleeps, then either fails (prints `fail` to stderr,
exits 1; only for sources containing `fail_if` when that is set) or writes the `-o` file.
"""

import json
import os
import sys
import time
from pathlib import Path

config = json.loads(Path(__file__).with_name("nvcc.json").read_text())
args = sys.argv[1:]
if args == ["--version"]:
    print(config["version"])
    sys.exit(0)

source = args[-1]
started = time.time()
time.sleep(config.get("sleep", 0))
record = {"argv": args, "cwd": os.getcwd(), "pid": os.getpid(), "source": source,
          "start": started, "end": time.time()}
with open(config["calls"], "a") as calls:
    calls.write(json.dumps(record) + "\n")

fail_if = config.get("fail_if", "")
if config.get("fail") and fail_if in source:
    print(f"{source}(1): error: {config['fail']}", file=sys.stderr)
    sys.exit(1)
output = args[args.index("-o") + 1]
Path(output).write_bytes(b"not really a shared library: " + Path(source).read_bytes()[:64])
print(f"fake nvcc: compiled {source}")
