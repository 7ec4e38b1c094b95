"""units: a tiny example project for AHE's SWE-CI tasks."""


def to_meters(feet):
    return round(feet * 0.3048, 4)


def to_feet(meters):
    return round(meters / 0.3048, 4)


def to_inches(meters):
    return round(meters / 0.0254, 4)


def to_km(meters):
    return meters / 1000


def to_miles(meters):
    return round(meters / 1609.344, 4)


def parse(text):
    value, unit = text.split()
    return float(value) * {'m': 1.0, 'km': 1000.0, 'ft': 0.3048}[unit]


def describe(meters):
    return f'{meters:g} m'
