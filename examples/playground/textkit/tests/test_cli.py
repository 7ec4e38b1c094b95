import unittest

from textkit.cli import USAGE, run


class CliTest(unittest.TestCase):
    def test_rle_round_trip(self):
        self.assertEqual(run(["rle", "aaab"]), (0, "3a1b"))
        self.assertEqual(run(["unrle", "3a1b"]), (0, "aaab"))

    def test_roman(self):
        self.assertEqual(run(["roman", "1994"]), (0, "MCMXCIV"))
        self.assertEqual(run(["unroman", "XLII"]), (0, "42"))

    def test_wrap_reads_stdin(self):
        self.assertEqual(run(["wrap", "10"], stdin="the quick brown fox"), (0, "the quick\nbrown fox"))

    def test_fill(self):
        self.assertEqual(run(["fill", "10"], stdin="the quick brown fox jumps"),
                         (0, "the  quick\nbrown  fox\njumps"))

    def test_suggest(self):
        self.assertEqual(run(["suggest", "helo", "hello", "world", "help"]), (0, "hello\nhelp"))

    def test_top(self):
        self.assertEqual(run(["top", "2"], stdin="a b a c a b"), (0, "a 3\nb 2"))

    def test_errors_exit_2(self):
        """Bad input is reported with exit code 2 and names the command."""
        code, out = run(["roman", "0"])
        self.assertEqual(code, 2)
        self.assertTrue(out.startswith("roman:"))
        self.assertEqual(run(["roman"]), (2, "roman: missing argument"))

    def test_usage(self):
        self.assertEqual(run([]), (2, USAGE))
        code, out = run(["nope"])
        self.assertEqual(code, 2)
        self.assertIn("unknown command 'nope'", out)


if __name__ == "__main__":
    unittest.main()
