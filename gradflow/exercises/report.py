"""A workspace's results as a course grades them: one record per exercise, as JSON or as JUnit XML.

    {"number": 2, "name": "mul_backward", "track": "autograd basics",
     "status": "pass" | "fail" | "todo" | "error", "score": 1 | 0, "message": "...", "seed": 1234,
     "hints": 0 to 3}

"seed" draws the exercise's inputs again (`check NAME --seed 1234`); "hints" counts the levels `hint`
gave, kept in the learner's own workspace: self-reported, as a course should read it.

"todo" is a file still as `start` wrote it; "error" is a file that is missing, does not parse or
raises, so that a workspace with a file deleted can never pass. JUnit XML (one <testcase> per
exercise, a <failure> when it does not pass, of type "todo" for a blank, an <error> for an error)
is what GitHub Classroom's and most CI systems' test reporters read; a blank is a failure there,
never a skip, so that an untouched workspace can never look green.
"""

import json
import xml.etree.ElementTree as ET

from gradflow.engine.files import check_kind, write_atomically
from gradflow.exercises.catalog import EXERCISES

_STATUS = {"todo": "todo", "missing": "error", "error": "error"}  # a Failed's kind -> status; the rest: fail


def record(exercise, verdict, hints=0):
    """One exercise's result, from its isolation.Verdict; `hints` the levels `hint` gave (self-reported:
    the workspace that keeps the count is the learner's)."""
    status = "pass" if verdict.ok else _STATUS.get(verdict.said.kind, "fail")
    return {
        "number": EXERCISES.index(exercise) + 1,
        "name": exercise.name,
        "track": exercise.track,
        "status": status,
        "score": int(verdict.ok),
        "message": str(verdict.said),
        "seed": verdict.seed,
        "hints": hints,
    }


def _diagnosis(message):
    """The line of a failure's message that says what is wrong: its hint when it has one, else its last
    line (the first often only says where: "on gradflow's gradcheck case ...:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    hints = [line for line in lines if line.startswith("hint:")]
    return (hints or lines or [""])[-1]


def as_json(records, directory):
    """The records and their total, as one JSON document."""
    score = sum(r["score"] for r in records)
    return json.dumps(
        {"workspace": str(directory), "score": score, "max_score": len(records), "exercises": records}, indent=1
    )


def as_junit(records):
    """The records as JUnit XML: a <testsuite> per track, in order, a <testcase> per exercise."""
    suites = ET.Element("testsuites", name="gradflow exercises")
    for track in dict.fromkeys(r["track"] for r in records):
        mine = [r for r in records if r["track"] == track]
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=track,
            tests=str(len(mine)),
            failures=str(sum(r["status"] in ("fail", "todo") for r in mine)),
            errors=str(sum(r["status"] == "error" for r in mine)),
        )
        for r in mine:
            case = ET.SubElement(
                suite, "testcase", classname=f"exercises.{track}", name=f"{r['number']:02d}_{r['name']}"
            )
            if r["status"] == "pass":
                ET.SubElement(case, "system-out").text = r["message"]
            else:
                tag = "error" if r["status"] == "error" else "failure"
                ET.SubElement(case, tag, message=_diagnosis(r["message"]), type=r["status"]).text = r["message"]
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(path, records):
    """Write as_junit(records) to `path` atomically (gradflow/engine/files.py), replacing only a JUnit report:
    any other file there (a learner's `--junit ws/02_mul_backward.py`, given by mistake) is refused in one
    line and kept as it is."""
    check_kind(path, (b"<?xml", b"<testsuites"), "a JUnit report")
    write_atomically(path, as_junit(records), "the JUnit report ")
