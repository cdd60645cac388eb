"""SDPA forward+backward time against dropout_p (fp16, CUDA): does the fused kernel's cost depend on p?"""
import torch, torch.nn.functional as F
def bench(shape, causal, p, n=30):
    q, k, v = (torch.randn(*shape, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(3))
    g = torch.randn(*shape, device="cuda", dtype=torch.float16)
    def step():
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
        out.backward(g)
    for _ in range(5): step()
    torch.cuda.synchronize()
    fw = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    fw[0].record()
    for _ in range(n): F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
    fw[1].record(); torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    for _ in range(n): step()
    ev[1].record(); torch.cuda.synchronize()
    return fw[0].elapsed_time(fw[1]) / n, ev[0].elapsed_time(ev[1]) / n
print(torch.__version__, torch.cuda.get_device_name())
for shape, causal in [((16, 12, 1024, 64), True), ((32, 16, 128, 64), True), ((32, 12, 512, 64), False), ((8, 12, 1024, 64), True)]:
    for p in (0.0, 1e-30, 1e-4, 0.1, 0.5):
        f, fb = bench(shape, causal, p)
        print(f"{shape} causal={causal} p={p:g}: fwd {f*1000:8.1f} us  fwd+bwd {fb*1000:8.1f} us")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for p in (1e-30, 0.1):
        q, k, v = (torch.randn(16, 16, 1024, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True); torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=90))
