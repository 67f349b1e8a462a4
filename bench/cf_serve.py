"""Starting a `certfleet serve` for the Python benchmarks (fanout_bench.py, retention_bench.py)."""
import os
import subprocess
import sys


def prepare_binary(binary):
    """Brings a build tree's certfleet up to date (bench/build.sh: after ./scripts/run.sh or
    test.sh alike); an installed binary is used as it is. CERTFLEET_BENCH_CHECK=1 (the
    tests/bench/commands_test.py check) stops here, the arguments parsed and the build known."""
    tree = os.path.dirname(binary) or "."
    if os.path.isfile(os.path.join(tree, "CMakeCache.txt")):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        subprocess.run([os.path.join(root, "bench", "build.sh"), "--build", tree, "certfleet"], check=True)
    if os.environ.get("CERTFLEET_BENCH_CHECK") == "1":
        sys.exit(0)


def start_serve(binary, data, settings):
    """Starts `certfleet serve --mode all` on `data` with `--set name=value` for each setting, on a
    free port of 127.0.0.1; returns (process, port, owner token) once it says where it listens."""
    args = [binary, "serve", "--mode", "all", "--data", data, "--listen", "127.0.0.1:0", "--set", "log_level=warn"]
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    srv = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    for line in srv.stdout:
        if " serving: " in line:
            port = int(line.rsplit(":", 1)[1])
            return srv, port, open(os.path.join(data, "owner-token")).read().strip()
    srv.wait()
    raise RuntimeError(f"certfleet serve exited with {srv.returncode} before it was serving")
