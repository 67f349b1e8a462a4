"""Starting a `certfleet serve` for the Python benchmarks (fanout_bench.py, retention_bench.py)."""
import os
import subprocess


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
