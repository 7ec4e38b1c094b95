"""Roman numerals between 1 and 3999."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(number):
    """The canonical numeral of `number` (1..3999)."""
    if not isinstance(number, int) or isinstance(number, bool):
        raise TypeError("to_roman() takes an int")
    if number < 1 or number > 3999:
        raise ValueError("only 1..3999 have a numeral")
    parts = []
    for value, symbol in _VALUES:
        while number >= value:
            parts.append(symbol)
            number -= value
    return "".join(parts)


def from_roman(numeral):
    """The value of a canonical numeral; anything else (IIII, IC, '') is an error."""
    if not numeral or not isinstance(numeral, str):
        raise ValueError("empty numeral")
    text = numeral.upper()
    total = 0
    i = 0
    for value, symbol in _VALUES:
        while text.startswith(symbol, i):
            total += value
            i += len(symbol)
    if i != len(text) or total == 0 or to_roman(total) != text:
        raise ValueError(f"not a canonical numeral: {numeral!r}")
    return total
