"""Time to verdict on the real GPU, pair by pair: pytest --gpucheck (torch by default) against torch's own import and
device listing; then where the torch child's time goes."""
import json, os, subprocess, sys, time
from pathlib import Path
py, repo, out = sys.executable, Path(sys.argv[1]), Path(sys.argv[2])
work = Path("/tmp/ttv"); work.mkdir(exist_ok=True); (work / "pytest.ini").write_text("[pytest]\n")
env = {**os.environ, "PYTHONPATH": str(repo)}
rows = []
def timed(argv):
    t = time.perf_counter(); p = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True); return time.perf_counter() - t, p
for i in range(4):
    g, p = timed([py, "-m", "pytest", "-p", "pytest_gpucheck", "-p", "no:cacheprovider", "-q", "--gpucheck", f"--gpucheck-json={work}/r{i}.json"])
    b, _ = timed([py, "-c", "import torch; torch.cuda.device_count(); torch.cuda.is_available()"])
    n, _ = timed([py, "-m", "pytest", "-p", "pytest_gpucheck", "-p", "no:cacheprovider", "-q", "--gpucheck", "--gpucheck-framework=none"])
    r = json.loads((work / f"r{i}.json").read_text())
    kids = {k: v["exit"]["duration_s"] for k, v in r["facts"].items() if isinstance(v, dict) and v.get("exit")}
    rows.append({"gpucheck_s": round(g, 2), "listing_s": round(b, 2), "none_s": round(n, 2), "ratio": round(g / b, 2), "rc": p.returncode, "verdict": r["verdict"], "children": kids})
    print(json.dumps(rows[-1]))
code = """
import time, json
t0 = time.perf_counter()
from gpucheck.frameworks.torch import child, placement
t1 = time.perf_counter(); f = child.probe_torch(); t2 = time.perf_counter()
ctx = None
g = placement.set_up(60.0)
try:
    next(g)
except StopIteration as s:
    ctx = s.value
t3 = time.perf_counter(); out = {"import_gpucheck": t1 - t0, "probe_torch": t2 - t1, "set_up": t3 - t2}
for name in ("placement_step", "numerics_step", "training_step"):
    a = time.perf_counter(); list(getattr(placement, name)(ctx, 60.0)); out[name] = time.perf_counter() - a
print(json.dumps({k: round(v, 3) for k, v in out.items()}))
"""
for i in range(2):
    p = subprocess.run([py, "-c", code], cwd=work, env=env, capture_output=True, text=True)
    print("child parts:", p.stdout.strip(), p.stderr[-500:])
(out / "ttv.json").write_text(json.dumps(rows, indent=1))
