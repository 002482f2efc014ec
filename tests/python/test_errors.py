"""Caller errors cross into Python as mixlab.Error (a ValueError) carrying the C++ message, which
names the function, the argument, what was expected and what came.
"""
import unittest

import torch

import mixlab


class ErrorTest(unittest.TestCase):
    def test_is_a_value_error(self):
        self.assertTrue(issubclass(mixlab.Error, ValueError))

    def test_bad_pattern_spec(self):
        with self.assertRaises(mixlab.Error) as cm:
            mixlab.Pattern("pwo2")
        self.assertIn("pwo2", str(cm.exception))
        with self.assertRaisesRegex(mixlab.Error, "pwo2"):
            mixlab.resolvent(torch.zeros(1, 1, 4, 1), torch.zeros(1, 1, 4, 0), torch.zeros(1, 1, 4, 2), "pwo2")

    def test_bad_resolvent_shape_names_the_argument(self):
        p = mixlab.Pattern("pow2")
        x = torch.zeros(1, 1, 8, 2)
        alpha = torch.zeros(1, 1, 8, p.max_width(8) + 1)
        with self.assertRaises(mixlab.Error) as cm:
            mixlab.resolvent(alpha, torch.zeros(1, 1, 8, 99), x, p)
        msg = str(cm.exception)
        self.assertIn("beta", msg)
        self.assertIn("99", msg)

    def test_bad_mixer_spec_and_dims(self):
        with self.assertRaisesRegex(mixlab.Error, "bogus"):
            mixlab.mixer("bogus", 16, 2)
        with self.assertRaisesRegex(mixlab.Error, "local"):
            mixlab.check_mixer_spec("local:0")
        with self.assertRaisesRegex(mixlab.Error, "d_model"):
            mixlab.mixer("gla", 0, 2)
        # A per-layer list ("ssm|attention") names a model's mixers (hybrid stacks, C++ only);
        # one mixer refuses it by name instead of reading an unknown family.
        with self.assertRaisesRegex(mixlab.Error, "'ssm\\|attention': a per-layer list"):
            mixlab.mixer("ssm|attention", 16, 2)
        with self.assertRaisesRegex(mixlab.Error, "per-layer list"):
            mixlab.check_mixer_spec("ssm*2")

    def test_mixer_layer_specs(self):
        self.assertEqual(mixlab.mixer_layer_specs("ssm*3|attention", 4), ["ssm", "ssm", "ssm", "attention"])
        self.assertEqual(mixlab.mixer_layer_specs("gla|local:4", 4), ["gla", "local:4", "gla", "local:4"])
        self.assertEqual(mixlab.mixer_layer_specs("brl:w=8:m=8", 2), ["brl:w=8:m=8", "brl:w=8:m=8"])
        with self.assertRaisesRegex(mixlab.Error, "the list names 2 layers, which does not divide"):
            mixlab.mixer_layer_specs("ssm|attention", 3)

    def test_kernel_errors(self):
        with self.assertRaisesRegex(mixlab.Error, "path"):
            mixlab.toeplitz(torch.zeros(1, 4), torch.zeros(1, 1, 4, 2), path="dft")
        with self.assertRaisesRegex(mixlab.Error, "toeplitz"):
            mixlab.toeplitz(torch.zeros(1, 2), torch.zeros(1, 1, 4, 2))  # Tmax < T
        with self.assertRaisesRegex(mixlab.Error, "T"):
            mixlab.analyze("pow2", 0)

    def test_wrong_argument_type(self):
        with self.assertRaisesRegex(mixlab.Error, "pattern must be"):
            mixlab.resolvent(torch.zeros(1, 1, 4, 1), torch.zeros(1, 1, 4, 0), torch.zeros(1, 1, 4, 2), 3)


if __name__ == "__main__":
    unittest.main()
