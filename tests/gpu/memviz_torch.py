"""Open tcuda snapshots with torch's own tools: pickle.load, then
torch.cuda._memory_viz's segment_plot, trace_plot (both views), segsum and
trace. Usage: memviz_torch.py SNAPSHOT...; exit 77 without torch."""
import pickle
import sys

try:
    import torch.cuda._memory_viz as mv
except Exception as e:  # no torch here
    print("SKIPPED: torch.cuda._memory_viz unavailable:", e)
    sys.exit(77)

for path in sys.argv[1:]:
    with open(path, "rb") as f:
        s = pickle.load(f)
    assert set(s) >= {"segments", "device_traces", "allocator_settings"}, set(s)
    html = mv.segment_plot(s)
    assert "snapshot.pickle" in html, "segment_plot embedded no snapshot"
    mv.trace_plot(s)
    mv.trace_plot(s, plot_segments=True)
    summary = mv.segsum(s)
    text = mv.trace(s)
    n = sum(len(t) for t in s["device_traces"])
    print(f"{path}: {len(s['segments'])} segments, {n} trace entries; segsum {len(summary)} chars, "
          f"trace {len(text)} chars: ok")
