"""Sum GPU kernel time in a Chrome trace; for the harness's, inside its 'actual' (compiled) mark."""
import collections, json, sys
path, window = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
ev = json.load(open(path))["traceEvents"]
gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
if window:
    marks = [e for e in ev if e.get("name") == window and e.get("cat") == "user_annotation"]
    lo, hi = marks[0]["ts"], marks[0]["ts"] + marks[0]["dur"]
    corr = {e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
            and "correlation" in e.get("args", {}) and lo <= e["ts"] <= hi}
    gpu = [e for e in gpu if e.get("args", {}).get("correlation") in corr]
    print(f"{path}: window {window}: cpu span {hi - lo:.0f} us, {len(corr)} launches")
tot = sum(e["dur"] for e in gpu)
span = (max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)) if gpu else 0
by = collections.defaultdict(lambda: [0, 0.0])
for e in gpu:
    by[e["name"][:90]][0] += 1; by[e["name"][:90]][1] += e["dur"]
print(f"{path}: {len(gpu)} gpu events, busy {tot:.0f} us, span {span:.0f} us, {len(by)} names")
for n, (c, d) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"  {d:9.0f} us {c:5d}  {n}")
