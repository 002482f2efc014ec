"""One file write for the benchmark scripts (bench_docs.py, bench_takes.py, bench/baselines/run.py):
written next to its name, flushed to disk and renamed, so an interrupted run leaves the old file
whole."""
import os


def write_whole(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
