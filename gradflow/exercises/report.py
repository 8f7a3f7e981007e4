"""A workspace's results as a course grades them: one record per exercise, as JSON or as JUnit XML.

    {"number": 2, "name": "mul_backward", "track": "autograd basics",
     "status": "pass" | "fail" | "todo" | "error", "score": 1 | 0, "message": "...", "hints": 0 to 3}

"todo" is a file still as `start` wrote it; "error" is a file that is missing, does not parse or
raises, so that a workspace with a file deleted can never pass. JUnit XML (one <testcase> per
exercise, a <failure> when it does not pass, of type "todo" for a blank, an <error> for an error)
is what GitHub Classroom's and most CI systems' test reporters read; a blank is a failure there,
never a skip, so that an untouched workspace can never look green.
"""

import json
import xml.etree.ElementTree as ET

from gradflow.exercises.catalog import EXERCISES

_STATUS = {"todo": "todo", "missing": "error", "error": "error"}  # a Failed's kind -> status; the rest: fail


def record(exercise, ok, said, hints=0):
    """One exercise's result: `ok` and `said` as workspace.check returns them, `hints` the levels taken."""
    status = "pass" if ok else _STATUS.get(said.kind, "fail")
    return {
        "number": EXERCISES.index(exercise) + 1,
        "name": exercise.name,
        "track": exercise.track,
        "status": status,
        "score": int(ok),
        "message": str(said),
        "hints": hints,
    }


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
                first = r["message"].splitlines()[0]
                ET.SubElement(case, tag, message=first, type=r["status"]).text = r["message"]
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
