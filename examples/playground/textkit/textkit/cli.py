"""`python -m textkit.cli COMMAND ...`: the library as a command-line tool."""

import sys

from textkit import distance, rle, roman, stats, wrap

USAGE = "usage: textkit {rle|unrle|roman|unroman|wrap|fill|suggest|top} ARGS"


def run(argv, stdin=""):
    """Run one command; returns (exit_code, output). Errors give exit code 2 and a message."""
    if not argv:
        return 2, USAGE
    command, args = argv[0], argv[1:]
    try:
        if command == "rle":
            return 0, rle.encode(" ".join(args))
        if command == "unrle":
            return 0, rle.decode(" ".join(args))
        if command == "roman":
            return 0, roman.to_roman(int(args[0]))
        if command == "unroman":
            return 0, str(roman.from_roman(args[0]))
        if command in ("wrap", "fill"):
            lines = (wrap.wrap if command == "wrap" else wrap.fill)(stdin, int(args[0]))
            return 0, "\n".join(lines)
        if command == "suggest":
            return 0, "\n".join(distance.closest(args[0], args[1:]))
        if command == "top":
            return 0, "\n".join(f"{w} {c}" for w, c in stats.top_words(stdin, int(args[0])))
    except IndexError:
        return 2, f"{command}: missing argument"
    except (ValueError, TypeError) as exc:
        return 2, f"{command}: {exc}"
    return 2, f"unknown command {command!r}\n{USAGE}"


def main(argv=None):
    code, output = run(sys.argv[1:] if argv is None else argv, sys.stdin.read() if not sys.stdin.isatty() else "")
    print(output, file=sys.stdout if code == 0 else sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
