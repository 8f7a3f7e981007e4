"""Built-in fine-tuning tasks: conversations gradflow generates itself, with a held-out split graded exactly.

A task is a skill a chat model lacks before fine-tuning and can learn in minutes: every example is
made from a seed by a few lines of code, so the data is unlimited, owned by the project, and the
held-out split is graded by an exact rule rather than by eye.

    task = TASKS["records"]
    train = task.conversations("train", 2000)      # [{"messages": [...]}, ...]
    held_out = task.conversations("held-out", 50)
    task.grade(reply, held_out[0])                 # "exact", "fields" or "wrong"

records: a sentence about a person becomes one line of JSON with fixed keys, in a fixed order,
ages as numbers:

    user:      Turn into a JSON record: In Lisbon lives Ana Moreau, aged 31.
    assistant: {"name": "Ana Moreau", "age": 31, "city": "Lisbon"}

A 135M instruct model understands the request but answers in its own words or its own JSON
(other keys, a code fence, a sentence around it); after LoRA fine-tuning it answers in the format.
Held-out examples use first names, surnames and cities the training split never shows, so the
score measures the skill (copy the right words into the right places), not memorised records.
"""

import json

import numpy as np

FIRST_NAMES = (
    "Ana", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Keiko", "Liam",
    "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wen", "Yusuf",
    "Zoe", "Aiko", "Bruno", "Clara", "Diego", "Emma", "Felix", "Gita", "Hana", "Ivan", "Jade", "Kofi",
    "Lena", "Marco", "Nora", "Omar", "Priya", "Rafael", "Sara", "Tomas", "Uma", "Viktor", "Wanda", "Xavier",
)  # fmt: skip
SURNAMES = (
    "Moreau", "Silva", "Novak", "Okafor", "Tanaka", "Larsen", "Haddad", "Kowalski", "Rossi", "Schmidt",
    "Nguyen", "Garcia", "Ivanova", "Mensah", "Dubois", "Eriksen", "Fischer", "Gupta", "Horvat", "Jansen",
    "Kim", "Lopez", "Murphy", "Nakamura", "Oliveira", "Petrov", "Quist", "Reyes", "Sato", "Torres",
    "Underwood", "Varga", "Weber", "Yilmaz", "Zhou", "Abbott", "Becker", "Costa", "Duarte", "Evans",
)  # fmt: skip
CITIES = (
    "Lisbon", "Oslo", "Nairobi", "Kyoto", "Lima", "Toronto", "Krakow", "Cairo", "Dublin", "Hanoi",
    "Madrid", "Perth", "Seoul", "Zurich", "Accra", "Bergen", "Chennai", "Denver", "Florence", "Glasgow",
    "Havana", "Istanbul", "Jakarta", "Kampala", "Leipzig", "Manila", "Naples", "Porto", "Quito", "Riga",
    "Santiago", "Tbilisi", "Utrecht", "Valencia", "Warsaw", "Yokohama", "Zagreb", "Austin", "Bogota", "Cork",
)  # fmt: skip
SENTENCES = (
    "{name} is {age} and lives in {city}.",
    "{name}, {age}, from {city}.",
    "In {city} lives {name}, aged {age}.",
    "{name} ({age}) is based in {city}.",
    "Meet {name}: {age} years old, living in {city}.",
    "{city} is home to {name}, who is {age}.",
    "At {age}, {name} moved to {city}.",
    "{name} turned {age} this year in {city}.",
)
ASK = "Turn into a JSON record: "


def _names(names, split):
    """The held-out split draws from the last quarter of each list, the training split from the rest."""
    cut = len(names) - len(names) // 4
    return names[cut:] if split == "held-out" else names[:cut]


class Records:
    """A sentence about a person -> {"name": ..., "age": ..., "city": ...} as one line of JSON."""

    name = "records"
    summary = 'a sentence about a person -> one line of JSON: {"name": ..., "age": ..., "city": ...}'
    seeds = {"train": 0, "held-out": 1}

    def conversations(self, split, n):
        """n conversations of the split ("train" or "held-out"), the same for the same (split, n)."""
        if split not in self.seeds:
            raise ValueError(f"records: split must be one of {', '.join(self.seeds)}, got {split!r}")
        rng = np.random.default_rng(self.seeds[split])
        first, last, cities = (_names(names, split) for names in (FIRST_NAMES, SURNAMES, CITIES))
        out = []
        for _ in range(n):
            record = {
                "name": f"{first[rng.integers(len(first))]} {last[rng.integers(len(last))]}",
                "age": int(rng.integers(18, 91)),
                "city": cities[rng.integers(len(cities))],
            }
            sentence = SENTENCES[rng.integers(len(SENTENCES))].format(**record)
            messages = [{"role": "user", "content": ASK + sentence}, {"role": "assistant", "content": answer(record)}]
            out.append({"messages": messages, "record": record})
        return out

    @staticmethod
    def grade(reply, example):
        """ "exact": the reply is the expected line; "fields": it holds a JSON object with exactly the
        three keys and their values (in another order or layout, or with text around it); "wrong": anything else."""
        expected = example["record"]
        if reply.strip() == answer(expected):
            return "exact"
        start, end = reply.find("{"), reply.rfind("}")
        try:
            found = json.loads(reply[start : end + 1]) if 0 <= start < end else None
        except ValueError:
            found = None
        if found == expected:  # the same keys and values, in any order
            return "fields"
        return "wrong"


def answer(record):
    """The one right reply: keys in the order name, age, city, and JSON's own spacing."""
    return json.dumps({"name": record["name"], "age": record["age"], "city": record["city"]})


TASKS = {task.name: task for task in (Records(),)}


def get_task(name):
    """The task called name, or an error naming the tasks there are."""
    if name not in TASKS:
        raise ValueError(f"--task must be one of {', '.join(TASKS)}, got {name!r}")
    return TASKS[name]
