"""`lumion calibrate` says what each kind of warning means for the user (issue 29)."""

from lab_scripts.cmd_calibrate import WARNING_MEANINGS, warning_meanings

WARNINGS = [
    "tbu:0.4.5: crosstalk fit set aside, the design law is used (residual of 6.0 sigma)",
    "tbu:1.2.3: crosstalk fit set aside, the design law is used (residual of 5.1 sigma)",
    "tbu:0.0.1: failed (dead): no fringe",
]


def test_each_kind_of_warning_is_explained_once():
    lines = warning_meanings(WARNINGS)
    assert len(lines) == 2  # two crosstalk warnings, one explanation
    assert "design value" in lines[0]
    assert "calibrate again" in lines[0]
    assert "routing" in lines[1]


def test_no_warning_no_explanation():
    assert warning_meanings([]) == []
    assert set(WARNING_MEANINGS) >= {"crosstalk fit set aside"}
