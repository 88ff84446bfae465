#!/usr/bin/env python3
"""Record real PyTorch training runs as memory snapshots: the ground truth for
`tcuda replay --simulate SNAPSHOT` and `tcuda whatif`. Run it on the GPU
machine, with torch 2.11.

Usage:
  scripts/record_torch_histories.py --out DIR [NAME ...]
      record every run (or the named ones), each in a fresh process, and
      print its limit, entries, OOMs, retries, peaks and pickle size. A run
      whose limit derives from a base run (RUNS) records the base first
      unless DIR already has its stats
  scripts/record_torch_histories.py --run WORKLOAD [--conf C] [--limit BYTES]
      run one workload once under PYTORCH_CUDA_ALLOC_CONF=C and, with
      --limit, set_per_process_memory_fraction(BYTES / total_memory); print
      {"raised": bool, "num_ooms": n, ...} as one JSON line. An OOM ends the
      run (raised: true): this is how tests/gpu/whatif_torch.sh checks a
      predicted min_limit. --snapshot FILE also dumps the run's history
  scripts/record_torch_histories.py --list
      the run names, workloads and configs

Each run writes into DIR:
  NAME.pickle      torch.cuda.memory._dump_snapshot's file (pickle.dump of
                   _snapshot()); stack frames are dropped except on 'oom'
                   entries (at most 8 kept), to keep the files small
  NAME.stats.json  {"checkpoints": [memory_stats() taken just before each
                   memory_snapshot() call, i.e. at each 'snapshot' entry],
                   "end": memory_stats() at the dump, "meta": {...}}
One run, tf_default, is also written as NAME.json: the same document as JSON.

The workloads are deterministic (seeded, cuDNN benchmark off) so that two
processes make the same allocation requests. A step that raises
torch.OutOfMemoryError is skipped, as a training script that catches it
would: its OOM stays in the history.
"""
import json
import os
import pickle
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)

# name: (workload, PYTORCH_CUDA_ALLOC_CONF, limit rule, max_entries, stacks)
# limit rule: None, or (base run, "tight" | "mid" | "low"): tight = 0.8 x the
# base run's peak allocated (OOMs), mid = halfway between its peak allocated
# and peak reserved (garbage collection has work to do), low = a quarter of
# the way (garbage collection on most new segments, and some OOMs). A base
# run not named and not yet in DIR is recorded first.
RUNS = {
    "tf_default": ("transformer", "", None, 1000000, False),
    "tf_expandable": ("transformer", "expandable_segments:True", None, 1000000, False),
    "tf_msplit128": ("transformer", "max_split_size_mb:128", None, 1000000, False),
    "tf_rp2": ("transformer", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", None, 1000000, False),
    "tf_gc": ("transformer", "garbage_collection_threshold:0.6,max_split_size_mb:128", ("tf_default", "mid"),
              1000000, False),
    "tf_limit": ("transformer", "", ("tf_default", "tight"), 1000000, True),
    "tf_trunc": ("transformer", "", None, 3000, False),
    "cnn_default": ("cnn", "", None, 1000000, False),
    "cnn_expandable": ("cnn", "expandable_segments:True", None, 1000000, False),
    "cnn_limit": ("cnn", "", ("cnn_default", "tight"), 1000000, True),
    "side_stream": ("side", "", None, 1000000, False),
    "graph_pool": ("graph", "", None, 1000000, False),
    "kv_decoder": ("kv", "", None, 1000000, False),
    "unet": ("unet", "", None, 1000000, False),
    "moe": ("moe", "", None, 1000000, False),
    "tf_var": ("transformer_var", "", None, 1000000, False),
    "tf_gc_var": ("transformer_var", "garbage_collection_threshold:0.6,max_split_size_mb:128", ("tf_var", "mid"),
                  1000000, True),
    "tf_gc_var_low": ("transformer_var", "garbage_collection_threshold:0.6,max_split_size_mb:128",
                      ("tf_var", "low"), 1000000, True),
    "rs3": ("streams3", "", None, 1000000, False),
}


# ---------------------------------------------------------------- workloads

def transformer(torch, step_done, shapes=None):
    """A 2-layer transformer; shapes: (batch, sequence length) per step."""
    nn = torch.nn
    torch.manual_seed(0)
    vocab, d = 4000, 256
    layer = nn.TransformerEncoderLayer(d, 4, 1024, dropout=0.0, batch_first=True)
    model = nn.ModuleDict({"emb": nn.Embedding(vocab, d), "enc": nn.TransformerEncoder(layer, 2),
                           "out": nn.Linear(d, vocab)}).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(1)
    for bs, seq in shapes or [(8, s) for s in [128, 384, 96, 512, 256, 448]]:
        def step():
            x = torch.randint(0, vocab, (bs, seq), device="cuda", generator=g)
            h = model["enc"](model["emb"](x))
            loss = nn.functional.cross_entropy(model["out"](h).flatten(0, 1), x.flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss)
        step_done(step)


def transformer_var(torch, step_done):
    """The transformer with batch size and sequence length changing every
    step (96 to 8192 tokens: the logits of the largest steps are blocks
    over 128 MiB, above max_split_size_mb:128)."""
    transformer(torch, step_done, [(8, 128), (4, 384), (16, 96), (2, 512), (12, 256), (16, 512), (6, 448),
                                   (10, 320), (3, 480), (14, 160), (8, 512), (1, 96)])


def cnn(torch, step_done):
    nn = torch.nn
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True

    def blk(i, o, s):
        return [nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU()]
    model = nn.Sequential(*blk(3, 32, 1), *blk(32, 64, 2), *blk(64, 128, 2), *blk(128, 128, 1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator(device="cuda").manual_seed(1)
    for bs, hw in [(16, 64), (32, 96), (8, 128), (24, 80), (32, 112), (16, 160)]:
        def step():
            x = torch.randn(bs, 3, hw, hw, device="cuda", generator=g)
            y = torch.randint(0, 10, (bs,), device="cuda", generator=g)
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss)
        step_done(step)


def side(torch, step_done):
    """A side stream whose blocks are used on the default stream
    (record_stream: their free completes later), and empty_cache."""
    side_s = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    keep = []
    for i, n in enumerate([3 << 20, 9 << 20, 1 << 20, 30 << 20, 5 << 20, 12 << 20]):
        def step():
            with torch.cuda.stream(side_s):
                x = torch.ones(n // 4, device="cuda")
                y = x * 2
            main.wait_stream(side_s)
            torch.cuda._sleep(2000000)  # keeps y's use pending on main
            z = y + 1
            y.record_stream(main)
            del x, y
            w = torch.empty(n // 8, device="cuda")
            keep.append(z.sum())
            del z, w
            if i % 3 == 2:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            return 0.0
        step_done(step)


def streams3(torch, step_done):
    """Three streams: a block made on one is used on the other two
    (record_stream) behind long kernels there (torch.cuda._sleep, matmuls),
    so its free stays pending across many entries and its stream makes new
    segments meanwhile. Waiting on one stream now and then completes some
    frees mid-step; the last step's frees are still pending at the dump (no
    allocation follows them)."""
    import random
    rng = random.Random(0)
    torch.manual_seed(0)
    streams = [torch.cuda.current_stream(), torch.cuda.Stream(), torch.cuda.Stream()]
    w = torch.randn(1024, 1024, device="cuda")
    torch.cuda.synchronize()  # w is read on the side streams
    sizes = [64 << 10, 256 << 10, 768 << 10, 1 << 20, 3 << 20, 6 << 20, 10 << 20, 24 << 20, 40 << 20]
    cycles = 1000000  # about half a millisecond on an H200
    for i in range(10):
        # (stream, bytes, sleep length, matmul?) per block: drawn here, not in step(), so that an OOM
        # (none expected) would not shift the later steps' plans
        plan = [(rng.randrange(3), rng.choice(sizes), rng.randrange(1, 8), rng.random() < 0.3)
                for _ in range(20)]

        def step():
            sums = []
            for k, (si, n, ms, mm) in enumerate(plan):
                a, b, c = streams[si], streams[(si + 1) % 3], streams[(si + 2) % 3]
                with torch.cuda.stream(a):
                    x = torch.ones(n // 4, device="cuda")
                for u in (b, c):
                    u.wait_stream(a)
                    with torch.cuda.stream(u):
                        torch.cuda._sleep(ms * cycles)
                        sums.append(x[:1024].sum())
                    x.record_stream(u)
                if mm:
                    # made on b, used on c behind a sleep
                    with torch.cuda.stream(b):
                        y = x.view(-1, 1024) @ w
                    c.wait_stream(b)
                    with torch.cuda.stream(c):
                        torch.cuda._sleep(ms * cycles)
                        sums.append(y[:1].sum())
                    y.record_stream(c)
                    del y
                del x
                if k % 7 == 6:
                    b.synchronize()
            return 0.0
        step_done(step)


def graph(torch, step_done):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512)).cuda()
    static_in = torch.randn(64, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        static_out = model(static_in)
    for i in range(4):
        def step():
            static_in.copy_(torch.randn(64, 512, device="cuda"))
            gr.replay()
            extra = torch.randn(256 * (i + 1), 1024, device="cuda")
            return float(static_out.sum() + extra.sum())
        step_done(step)
    del gr, static_out

    def last():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        return 0.0
    step_done(last)


def kv(torch, step_done):
    """LLM-style decoding: each layer's K and V caches grow by torch.cat."""
    torch.manual_seed(0)
    layers, d, heads = 4, 512, 8
    w = [torch.randn(d, 3 * d, device="cuda") * 0.02 for _ in range(layers)]
    for batch, tokens in [(4, 96), (2, 160), (6, 64)]:
        def step():
            with torch.no_grad():
                caches = [[None, None] for _ in range(layers)]
                h = torch.randn(batch, 1, d, device="cuda")
                for t in range(tokens):
                    x = h
                    for li in range(layers):
                        q, k, v = (x @ w[li]).split(d, dim=-1)
                        ck, cv = caches[li]
                        ck = k if ck is None else torch.cat([ck, k], 1)
                        cv = v if cv is None else torch.cat([cv, v], 1)
                        caches[li] = [ck, cv]
                        qh = q.view(batch, 1, heads, d // heads).transpose(1, 2)
                        kh = ck.view(batch, -1, heads, d // heads).transpose(1, 2)
                        vh = cv.view(batch, -1, heads, d // heads).transpose(1, 2)
                        a = torch.softmax(qh @ kh.transpose(-1, -2) / 8.0, -1) @ vh
                        x = x + a.transpose(1, 2).reshape(batch, 1, d)
                    h = x
                return float(h.sum())
        step_done(step)


def unet(torch, step_done):
    """A small diffusion-style UNet trained at three resolutions."""
    nn = torch.nn
    torch.manual_seed(0)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            c = [32, 64, 128]
            self.temb = nn.Linear(1, c[2])
            self.inc = nn.Conv2d(4, c[0], 3, padding=1)
            self.d1 = nn.Conv2d(c[0], c[1], 3, 2, 1)
            self.d2 = nn.Conv2d(c[1], c[2], 3, 2, 1)
            self.mid = nn.Conv2d(c[2], c[2], 3, padding=1)
            self.u2 = nn.ConvTranspose2d(c[2], c[1], 4, 2, 1)
            self.u1 = nn.ConvTranspose2d(2 * c[1], c[0], 4, 2, 1)
            self.out = nn.Conv2d(2 * c[0], 4, 3, padding=1)
            self.act = nn.SiLU()

        def forward(self, x, t):
            h0 = self.act(self.inc(x))
            h1 = self.act(self.d1(h0))
            h2 = self.act(self.d2(h1)) + self.temb(t)[:, :, None, None]
            m = self.act(self.mid(h2))
            u2 = self.act(self.u2(m))
            u1 = self.act(self.u1(torch.cat([u2, h1], 1)))
            return self.out(torch.cat([u1, h0], 1))
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = UNet().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(1)
    for bs, hw in [(8, 64), (4, 128), (8, 96), (2, 192), (6, 112)]:
        def step():
            x0 = torch.randn(bs, 4, hw, hw, device="cuda", generator=g)
            t = torch.rand(bs, 1, device="cuda", generator=g)
            noise = torch.randn(x0.shape, device="cuda", generator=g)
            xt = x0 * (1 - t)[:, :, None, None] + noise * t[:, :, None, None]
            loss = nn.functional.mse_loss(model(xt, t), noise)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss)
        step_done(step)


def moe(torch, step_done):
    """A mixture-of-experts decoder: a learned top-2 gate routes each token
    to 2 of 8 expert MLPs, so the tokens per expert (and the experts'
    activation sizes) change every step, as do batch and sequence length.
    Every op is deterministic (math attention, no atomics onto a shared
    index), so that the routing, and with it every request size, is the
    same in two processes."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    vocab, d, heads, layers, experts, topk, hidden = 4000, 256, 4, 2, 8, 2, 1024

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.gate = nn.Linear(d, experts, bias=False)
            self.up = nn.ModuleList(nn.Linear(d, hidden) for _ in range(experts))
            self.down = nn.ModuleList(nn.Linear(hidden, d) for _ in range(experts))

        def forward(self, x, mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = torch.softmax(q @ k.transpose(-1, -2) / (d // heads) ** 0.5 + mask, -1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            flat = self.ln2(x).reshape(b * t, d)
            probs = torch.softmax(self.gate(flat), -1)
            w, choice = probs.topk(topk, -1)
            w = w / w.sum(-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e in range(experts):
                # a token picks an expert at most once: its rows are unique,
                # so index_add_ adds one value per row (deterministic)
                tok, slot = (choice == e).nonzero(as_tuple=True)
                if tok.numel():
                    y = self.down[e](F.gelu(self.up[e](flat[tok])))
                    out.index_add_(0, tok, y * w[tok, slot].unsqueeze(1))
            # load balancing: fraction of tokens per expert x mean gate probability
            frac = torch.bincount(choice.flatten(), minlength=experts).float() / choice.numel()
            aux = experts * (frac * probs.mean(0)).sum()
            return x + out.view(b, t, d), aux

    model = nn.ModuleDict({"emb": nn.Embedding(vocab, d), "blocks": nn.ModuleList(Block() for _ in range(layers)),
                           "ln": nn.LayerNorm(d), "out": nn.Linear(d, vocab)}).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(1)
    for bs, seq in [(8, 256), (4, 512), (12, 128), (6, 384), (4, 448), (16, 96), (8, 320), (6, 512)]:
        def step():
            x = torch.randint(0, vocab, (bs, seq + 1), device="cuda", generator=g)
            mask = torch.full((seq, seq), float("-inf"), device="cuda").triu(1)
            h, aux = model["emb"](x[:, :-1]), 0.0
            for blk in model["blocks"]:
                h, a = blk(h, mask)
                aux = aux + a
            logits = model["out"](model["ln"](h))
            loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()) + 0.01 * aux
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return float(loss)
        step_done(step)


WORKLOADS = {"transformer": transformer, "cnn": cnn, "side": side, "graph": graph, "kv": kv, "unet": unet,
             "moe": moe, "transformer_var": transformer_var, "streams3": streams3}


# ---------------------------------------------------------------- one process

def child(name, workload, conf, limit, max_entries, stacks, out, snapshot=""):
    import torch
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    if limit:
        torch.cuda.set_per_process_memory_fraction(limit / total)
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=1000000, context=None, stacks="python")
    if out:
        torch.cuda.memory._record_memory_history(
            max_entries=max_entries, context="all" if stacks else None, stacks="python")
    checkpoints, ooms, raised = [], [], False

    def step_done(fn):
        nonlocal raised
        try:
            fn()
        except torch.OutOfMemoryError as e:
            ooms.append(str(e).splitlines()[0][:200])
            if not out:
                raised = True
                raise
        torch.cuda.synchronize()
        if out:
            checkpoints.append(torch.cuda.memory_stats())
            torch.cuda.memory_snapshot()  # adds the 'snapshot' entry
    try:
        WORKLOADS[workload](torch, step_done)
    except torch.OutOfMemoryError:
        pass
    end = torch.cuda.memory_stats()
    if snapshot:
        torch.cuda.memory._dump_snapshot(snapshot)
    if not out:
        print(json.dumps({"raised": raised, "num_ooms": end.get("num_ooms", 0),
                          "peak_reserved": end["reserved_bytes.all.peak"],
                          "peak_allocated": end["allocated_bytes.all.peak"], "total_memory": total,
                          "limit": limit, "first_error": ooms[0] if ooms else None}))
        return
    snap = torch.cuda.memory._snapshot()
    for tr in snap["device_traces"]:
        for e in tr:
            fr = e.get("frames") or []
            e["frames"] = fr[:8] if e.get("action") == "oom" else []
    for seg in snap["segments"]:
        seg["frames"] = []
        for b in seg.get("blocks", []):
            b["frames"] = []
    with open(os.path.join(out, name + ".pickle"), "wb") as fh:
        pickle.dump(snap, fh)
    if name == "tf_default":
        with open(os.path.join(out, name + ".json"), "w") as fh:
            json.dump(snap, fh)
    meta = {"name": name, "workload": workload, "conf": conf, "limit": limit,
            "fraction": (limit / total) if limit else None, "total_memory": total,
            "mem_get_info": list(torch.cuda.mem_get_info()), "max_entries": max_entries,
            "entries": [len(t) for t in snap["device_traces"]], "ooms_caught": ooms,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0)}
    with open(os.path.join(out, name + ".stats.json"), "w") as fh:
        json.dump({"checkpoints": checkpoints, "end": end, "meta": meta}, fh)


def record(out, names):
    os.makedirs(out, exist_ok=True)
    done = {}
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise SystemExit("unknown run(s): %s (--list prints them)" % ", ".join(unknown))
    order = [n for n in RUNS if not names or n in names]
    for n in list(order):
        base = RUNS[n][2] and RUNS[n][2][0]
        if base and base not in order and not os.path.exists(os.path.join(out, base + ".stats.json")):
            order.append(base)
    # runs whose limit needs a base run go after it
    order.sort(key=lambda n: RUNS[n][2] is not None)
    for n in order:
        workload, conf, rule, max_entries, stacks = RUNS[n]
        limit = 0
        if rule:
            base, how = rule
            if base not in done:
                with open(os.path.join(out, base + ".stats.json")) as fh:
                    done[base] = json.load(fh)["end"]
            pa, pr = done[base]["allocated_bytes.all.peak"], done[base]["reserved_bytes.all.peak"]
            limit = {"tight": int(0.8 * pa), "mid": (pa + pr) // 2, "low": pa + (pr - pa) // 4}[how]
            limit -= limit % (2 << 20)
            if how == "low" and limit < pa:  # a narrow gap: the 2 MiB step above the peak allocated
                limit = pa - pa % (2 << 20) + (2 << 20)
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        t0 = time.time()
        r = subprocess.run([sys.executable, HERE, "--child", n, workload, conf, str(limit), str(max_entries),
                            "1" if stacks else "0", out], env=env, capture_output=True, text=True, timeout=300)
        ok = r.returncode == 0
        print("%s %s: %.1fs%s" % ("ok" if ok else "FAILED", n, time.time() - t0,
                                  "" if ok else "\n" + r.stdout[-2000:] + r.stderr[-3000:]), flush=True)
        if ok:
            with open(os.path.join(out, n + ".stats.json")) as fh:
                doc = json.load(fh)
            e = done[n] = doc["end"]
            print("   limit %d, entries %d, %d OOMs, %d retries, peak allocated %d, peak reserved %d, "
                  "%d segment frees, pickle %d bytes" % (
                      limit, sum(doc["meta"]["entries"]), e.get("num_ooms", 0), e.get("num_alloc_retries", 0),
                      e["allocated_bytes.all.peak"], e["reserved_bytes.all.peak"], e.get("num_device_free", 0),
                      os.path.getsize(os.path.join(out, n + ".pickle"))), flush=True)


def main(argv):
    if argv[:1] == ["--child"]:
        name, workload, conf, limit, max_entries, stacks, out = argv[1:8]
        child(name, workload, conf, int(limit), int(max_entries), stacks == "1", out)
        return 0
    if argv[:1] == ["--list"]:
        for n, (w, c, rule, m, s) in RUNS.items():
            print(n, w, repr(c), rule or "", m)
        return 0
    if argv[:1] == ["--run"]:
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("--run", required=True, choices=sorted(WORKLOADS))
        ap.add_argument("--conf", default="")
        ap.add_argument("--limit", type=int, default=0)
        ap.add_argument("--snapshot", default="", help="also record the run's history into this pickle")
        a = ap.parse_args(argv)
        if os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") != a.conf:
            env = dict(os.environ)
            env["PYTORCH_CUDA_ALLOC_CONF"] = a.conf
            return subprocess.run([sys.executable, HERE] + argv, env=env).returncode
        child(a.run, a.run, a.conf, a.limit, 0, False, None, a.snapshot)
        return 0
    if argv[:1] == ["--out"] and len(argv) >= 2:
        record(argv[1], argv[2:])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
