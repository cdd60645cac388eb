"""Per-CPU launch speed map: for each logical CPU, us per tiny CUDA launch and a pure-Python loop."""
import json, os, random, sys, time
import torch
gpus = [int(g) for g in sys.argv[1].split(",")]
out = sys.argv[2]
cpus = sorted(os.sched_getaffinity(0))
res = {}
for g in gpus:
    dev = torch.device("cuda", g)
    x = torch.zeros(16, device=dev)
    for _ in range(200):
        x.add_(1)
    torch.cuda.synchronize(dev)
    for rnd in range(3):
        order = cpus[:]
        random.Random(rnd).shuffle(order)
        for c in order:
            os.sched_setaffinity(0, {c})
            time.sleep(0.002)
            t0 = time.perf_counter()
            for _ in range(1000):
                x.add_(1)
            torch.cuda.synchronize(dev)
            launch = (time.perf_counter() - t0) / 1000 * 1e6
            t0 = time.perf_counter()
            s = 0
            for i in range(100000):
                s += i
            py = (time.perf_counter() - t0) * 1e3
            res.setdefault(f"{g}:{c}", []).append([round(launch, 2), round(py, 3)])
os.sched_setaffinity(0, set(cpus))
json.dump(res, open(out, "w"))
for g in gpus:
    rows = [(c, sorted(v[0] for v in res[f"{g}:{c}"])[1], sorted(v[1] for v in res[f"{g}:{c}"])[1]) for c in cpus]
    print("gpu", g, "launch us by cpu:", " ".join(f"{c}:{l:.1f}" for c, l, p in rows))
    print("gpu", g, "py ms by cpu:", " ".join(f"{c}:{p:.2f}" for c, l, p in rows))
