"""Sum py-spy's raw (collapsed) stacks per function, for the samples inside
``dispatch_write``: inclusive share (the function or anything it called) and own share.

    python bench/profiles/aggregate_pyspy.py spy.txt [rows]
"""

from __future__ import annotations

import collections
import re
import sys

_PATH = re.compile(r" \((.*/)?(site-packages/|src/)?")


def main() -> None:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    with open(sys.argv[1], encoding="utf-8") as samples:
        for line in samples:
            stack, _, count_text = line.rstrip().rpartition(" ")
            count = int(count_text)
            frames = [_PATH.sub(" (", frame) for frame in stack.split(";")]
            if not any("dispatch_write" in frame for frame in frames):
                continue
            total += count
            for frame in set(frames):
                inclusive[frame] += count
            own[frames[-1]] += count
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    print(f"samples inside dispatch_write: {total}")
    print("== inclusive ==")
    for name, count in inclusive.most_common(rows):
        print(f"{100 * count / total:5.1f}%  {name}")
    print("== own ==")
    for name, count in own.most_common(30):
        print(f"{100 * count / total:5.1f}%  {name}")


if __name__ == "__main__":
    main()
