"""Every benchmark binary starts with bench/bench_setup.h's bench_setup(): the CPU block cache as the
CLI has it and its threads by a named rule, both in its output. Four binaries had left the cache
out and timed page faults the CLI never takes (docs/log/benchmarks-2026-11.md, "The decode
benchmarks on the CPU block cache"); this keeps a new one from doing so.
Run: /usr/bin/python3 -m unittest discover -s tests/scripts
"""
import glob
import os
import re
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")

# Binaries that set up by their own means, and why.
EXEMPT = {
    "design_bench.cpp": "the design search allocates no tensors",
    "train_bench.cpp": "takes --threads and installs the block cache itself, as `mixlab train` does",
}


class BenchSetupTest(unittest.TestCase):
    def test_every_benchmark_main_calls_bench_setup_first(self):
        sources = sorted(glob.glob(os.path.join(BENCH, "*_bench.cpp")))
        self.assertGreater(len(sources), 5)
        for path in sources:
            name = os.path.basename(path)
            if name in EXEMPT:
                continue
            text = open(path).read()
            with self.subTest(binary=name):
                self.assertIn('#include "bench_setup.h"', text)
                self.assertNotIn("BENCHMARK_MAIN()", text, "BENCHMARK_MAIN skips bench_setup")
                main = re.search(r"^int main\(int argc, char\*\* argv\) \{(.*?)^\}", text, re.S | re.M)
                self.assertIsNotNone(main, "no main(): BENCHMARK_MAIN would skip bench_setup")
                body = main.group(1)
                setup = body.find("bench_setup(")
                self.assertGreaterEqual(setup, 0, "main() does not call bench_setup")
                # Nothing before it may make a tensor (it would not come from the block cache).
                self.assertNotRegex(body[:setup], r"torch::|at::|register_all|RegisterBenchmark")

    def test_exemptions_name_files_that_exist(self):
        for name in EXEMPT:
            self.assertTrue(os.path.exists(os.path.join(BENCH, name)), name)


if __name__ == "__main__":
    unittest.main()
