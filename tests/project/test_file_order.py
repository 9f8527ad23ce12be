"""The suite hands its files to xdist's workers longest first (tests/support/file_order.py)."""

import configparser
import glob
import json
import os
from types import SimpleNamespace

from tests.support import file_order
from tests.support.paths import ROOT


def _items(*nodeids):
    return [SimpleNamespace(nodeid=nodeid) for nodeid in nodeids]


def test_files_go_longest_first_unrecorded_ones_before_all_and_tests_keep_their_order():
    items = _items("tests/a.py::t1", "tests/b.py::t1", "tests/a.py::t2", "tests/c.py::t1",
                   "tests/new.py::t1", "tests/b.py::t2", "tests/d.py::t1")
    seconds = {"tests/a.py": 1.0, "tests/b.py": 9.5, "tests/c.py": 4.0, "tests/d.py": 4.0}
    ordered = [item.nodeid for item in file_order.longest_first(items, seconds)]
    assert ordered == ["tests/new.py::t1", "tests/b.py::t1", "tests/b.py::t2",
                       "tests/c.py::t1", "tests/d.py::t1", "tests/a.py::t1", "tests/a.py::t2"]
    # No record: the collection's own order, each file's tests together.
    assert [i.nodeid for i in file_order.longest_first(items, {})] == [
        "tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "tests/b.py::t2",
        "tests/c.py::t1", "tests/new.py::t1", "tests/d.py::t1"]


def test_the_recorder_adds_phases_per_file_and_keeps_other_files(tmp_path):
    path = tmp_path / "seconds.json"
    path.write_text(json.dumps({"tests/old.py": 3.0, "tests/a.py": 100.0}))
    recorder = file_order.SecondsRecorder(str(path))
    for nodeid, duration in [("tests/a.py::t1", 0.5), ("tests/a.py::t1", 1.25),
                             ("tests/a.py::t2[x]", 2.0), ("tests/b.py::T::t", 0.004)]:
        recorder.add(nodeid, duration)
    recorder.write()
    assert json.loads(path.read_text()) == {"tests/a.py": 3.75, "tests/b.py": 0.0,
                                            "tests/old.py": 3.0}


def test_the_record_names_test_files_that_exist_and_pytest_keeps_the_collected_order():
    seconds = file_order.read_seconds()
    assert seconds, "tests/support/file_seconds.json is missing or empty"
    missing = [name for name in seconds if not os.path.isfile(os.path.join(ROOT, name))]
    assert missing == [], f"recorded files that no longer exist: {missing}"
    assert all(isinstance(value, (int, float)) and value >= 0 for value in seconds.values())
    unrecorded = sorted(os.path.relpath(path, ROOT) for path in
                        glob.glob(os.path.join(ROOT, "tests", "**", "test_*.py"), recursive=True)
                        if os.path.relpath(path, ROOT) not in seconds)
    assert unrecorded == [], f"record their seconds (--record-file-seconds): {unrecorded}"
    config = configparser.ConfigParser()
    config.read(os.path.join(ROOT, "pytest.ini"))
    assert "--no-loadscope-reorder" in config["pytest"]["addopts"].split()


def test_this_run_collected_its_files_longest_first(request):
    # This session's own collection (each worker collects the whole suite).
    seconds = file_order.read_seconds()
    files = list(dict.fromkeys(file_order.test_file(item.nodeid)
                               for item in request.session.items))
    assert "tests/project/test_file_order.py" in files
    lengths = [seconds.get(name, float("inf")) for name in files]
    assert lengths == sorted(lengths, reverse=True)
    # Each file's tests came together, in one run of the list.
    nodeids = [file_order.test_file(item.nodeid) for item in request.session.items]
    assert sum(1 for a, b in zip(nodeids, nodeids[1:]) if a != b) == len(files) - 1
