import unittest

import units as t


class TestUnits(unittest.TestCase):
    def test_to_meters(self):
        self.assertEqual(t.to_meters(10), 3.048)

    def test_to_feet(self):
        self.assertEqual(t.to_feet(3.048), 10.0)

    def test_to_inches(self):
        self.assertEqual(t.to_inches(0.0254), 1.0)

    def test_to_km(self):
        self.assertEqual(t.to_km(1500), 1.5)

    def test_to_miles(self):
        self.assertEqual(t.to_miles(1609.344), 1.0)

    def test_parse(self):
        self.assertEqual(t.parse('2 km'), 2000.0)

    def test_describe(self):
        self.assertEqual(t.describe(2.5), '2.5 m')

