"""units: a tiny example project for AHE's SWE-CI tasks."""


def to_meters(feet):
    return round(feet * 0.3048, 4)


def to_feet(meters):
    return round(meters / 0.3048, 4)
