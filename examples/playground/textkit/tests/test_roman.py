import unittest

from textkit.roman import from_roman, to_roman


class ToRomanTest(unittest.TestCase):
    def test_known_values(self):
        """Subtractive pairs are used for 4, 9, 40, 90, 400 and 900."""
        cases = {1: "I", 3: "III", 4: "IV", 9: "IX", 14: "XIV", 40: "XL", 90: "XC",
                 400: "CD", 1994: "MCMXCIV", 2024: "MMXXIV", 3999: "MMMCMXCIX"}
        for number, numeral in cases.items():
            self.assertEqual(to_roman(number), numeral, number)

    def test_bounds(self):
        for bad in (0, -1, 4000):
            with self.assertRaises(ValueError):
                to_roman(bad)

    def test_type(self):
        for bad in (1.5, "3", True):
            with self.assertRaises(TypeError):
                to_roman(bad)


class FromRomanTest(unittest.TestCase):
    def test_round_trip(self):
        for n in range(1, 4000):
            self.assertEqual(from_roman(to_roman(n)), n)

    def test_lower_case(self):
        self.assertEqual(from_roman("mcmxciv"), 1994)

    def test_non_canonical(self):
        for bad in ("IIII", "IC", "VX", "MMMM", "XIIII"):
            with self.assertRaises(ValueError, msg=bad):
                from_roman(bad)

    def test_garbage(self):
        for bad in ("", "ABC", "X1"):
            with self.assertRaises(ValueError):
                from_roman(bad)


if __name__ == "__main__":
    unittest.main()
