"""scripts/bench_docs.py (bench.sh --docs): it replaces exactly the block between its two marker
lines of the document with a run's tables, keeps everything else, and refuses (exit 1, document
untouched) when the markers or the run's files are missing. Run: /usr/bin/python3 -m unittest
discover -s tests/scripts
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "bench_docs.py")
BEGIN = "<!-- bench.sh --docs: generated from here -->"
END = "<!-- bench.sh --docs: generated up to here -->"


class BenchDocsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.run_dir = os.path.join(self.dir.name, "run")
        os.mkdir(self.run_dir)
        with open(os.path.join(self.run_dir, "machine.json"), "w") as f:
            json.dump({"cpu": "Test CPU", "cores": 2, "blas": "b", "libtorch": "1.13", "commit": "abcdef0123456",
                       "quick": False, "load_before": 0.1, "load_after": 0.9, "seconds": 42}, f)
        with open(os.path.join(self.run_dir, "tables.md"), "w") as f:
            f.write("# mixlab benchmarks (full run)\n\nTest CPU, 2 cores, commit abcdef0123\n\nThreads: x.\n\n"
                    "## bench_x\n\n| case | time |\n|---|---:|\n| BM_A | 1 ms |\n")
        self.doc = os.path.join(self.dir.name, "BENCHMARKS.md")

    def tearDown(self):
        self.dir.cleanup()

    def write_doc(self, text):
        with open(self.doc, "w") as f:
            f.write(text)

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)

    def test_replaces_only_the_marked_block(self):
        self.write_doc(f"# Head\n\nkept above\n\n{BEGIN}\nold table\n{END}\n\n## Later\nkept below\n")
        r = self.run_script(self.run_dir, self.doc)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = open(self.doc).read()
        self.assertTrue(text.startswith("# Head\n\nkept above\n\n" + BEGIN))
        self.assertTrue(text.endswith(END + "\n\n## Later\nkept below\n"))
        self.assertNotIn("old table", text)
        self.assertIn("### bench_x", text)  # one level below the section holding the markers
        self.assertIn("| BM_A | 1 ms |", text)
        self.assertIn("commit abcdef0123)", text)
        self.assertIn("BLAS b, LibTorch", text)  # no kernel name recorded: none printed
        self.assertNotIn("# mixlab benchmarks", text)
        # Twice in a row: the same result (the block is replaced, not appended).
        self.assertEqual(self.run_script(self.run_dir, self.doc).returncode, 0)
        self.assertEqual(open(self.doc).read(), text)
        self.assertFalse(os.path.exists(self.doc + ".tmp"))

    def test_names_the_blas_kernels_when_recorded(self):
        path = os.path.join(self.run_dir, "machine.json")
        machine = json.load(open(path))
        machine["blas_kernels"] = "OpenBLAS 0.3.21, Haswell kernels (forced by OPENBLAS_CORETYPE)"
        with open(path, "w") as f:
            json.dump(machine, f)
        self.write_doc(f"{BEGIN}\n{END}\n")
        r = self.run_script(self.run_dir, self.doc)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("BLAS b (OpenBLAS 0.3.21, Haswell kernels (forced by OPENBLAS_CORETYPE)), LibTorch",
                      open(self.doc).read())

    def test_says_how_many_takes_when_several(self):
        self.write_doc(f"{BEGIN}\n{END}\n")
        self.assertEqual(self.run_script(self.run_dir, self.doc).returncode, 0)
        self.assertNotIn("takes", open(self.doc).read())  # one take: the paragraph as before
        path = os.path.join(self.run_dir, "machine.json")
        machine = json.load(open(path))
        machine["takes"] = 3
        with open(path, "w") as f:
            json.dump(machine, f)
        r = self.run_script(self.run_dir, self.doc)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = open(self.doc).read()
        self.assertIn("`bash scripts/bench.sh --docs --takes 3`", text)
        self.assertIn("The suite ran 3 times, one take after the other", text)
        self.assertIn("median take", text)
        self.assertIn("time_min / time_max and ratio_min / ratio_max the range over the takes", text)

    def test_missing_markers_leave_the_document_untouched(self):
        for body in ("no markers at all\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{BEGIN}\n{END}\n"):
            with self.subTest(body=body):
                self.write_doc(body)
                r = self.run_script(self.run_dir, self.doc)
                self.assertEqual(r.returncode, 1)
                self.assertIn("must hold the line", r.stderr)
                self.assertEqual(open(self.doc).read(), body)

    def test_a_run_without_tables_is_refused(self):
        self.write_doc(f"{BEGIN}\n{END}\n")
        os.remove(os.path.join(self.run_dir, "tables.md"))
        r = self.run_script(self.run_dir, self.doc)
        self.assertEqual(r.returncode, 1)
        self.assertIn("machine.json and tables.md", r.stderr)
        self.assertEqual(open(self.doc).read(), f"{BEGIN}\n{END}\n")


if __name__ == "__main__":
    unittest.main()
