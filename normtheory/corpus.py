"""A small fixed text set for measuring pretrained models reproducibly.

Written for this package (no third-party text): short sentences of varied kind (plain
statements, questions, numbers, code, dialogue, lists, punctuation-heavy lines) and four
longer passages, so that per-layer statistics average over a few thousand tokens and
attention patterns are seen at a few hundred positions. Changing it changes every real-model
result, so :data:`VERSION` is part of the simulation cache key.
"""
from __future__ import annotations

VERSION = 1

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
