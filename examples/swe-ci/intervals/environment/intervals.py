"""intervals: a tiny example project for AHE's SWE-CI tasks."""


def merge(items):
    out = []
    for a, b in sorted(items):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def overlaps(x, y):
    return x[0] < y[1] and y[0] < x[1]


def length(items):
    return sum(b - a for a, b in merge(items))
