"""Benchmark placeholder replaced below."""
def add_bench_arguments(parser):
    pass
def run_bench(args):
    raise SystemExit("bench: not yet")
