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


def intersect(x, y):
    a, b = max(x[0], y[0]), min(x[1], y[1])
    return (a, b) if a < b else None


def contains(x, point):
    return x[0] <= point < x[1]


def gaps(items):
    m = merge(items)
    return [(m[i][1], m[i + 1][0]) for i in range(len(m) - 1)]


def clamp(x, lo, hi):
    return (max(x[0], lo), min(x[1], hi))


def split_at(x, point):
    return [(x[0], point), (point, x[1])] if contains(x, point) else [x]
