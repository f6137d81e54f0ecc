"""A nursery's exception group leaves as its sole exception, a Ctrl-C first (design §3.13)."""

from __future__ import annotations

import pytest

from actors._core._groups import sole_exception, unwrap_sole_exception


def test_the_only_leaf_of_nested_one_item_groups() -> None:
    error = ValueError("x")
    group = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [error])])
    assert sole_exception(group) is error


def test_several_failures_keep_their_group() -> None:
    group = ExceptionGroup("two", [ValueError("a"), RuntimeError("b")])
    assert sole_exception(group) is None


def test_a_ctrl_c_anywhere_wins_over_other_failures() -> None:
    interrupt = KeyboardInterrupt()
    nested = BaseExceptionGroup("inner", [RuntimeError("b"), interrupt])
    group = BaseExceptionGroup("outer", [ValueError("a"), nested])
    assert sole_exception(group) is interrupt


def test_the_context_manager_raises_the_leaf_bare() -> None:
    error = ValueError("x")
    with pytest.raises(ValueError, match="x") as info, unwrap_sole_exception():
        raise ExceptionGroup("one", [error])
    assert info.value is error
    with pytest.raises(KeyboardInterrupt), unwrap_sole_exception():
        raise BaseExceptionGroup("two", [ValueError("a"), KeyboardInterrupt()])
    with pytest.raises(ExceptionGroup), unwrap_sole_exception():
        raise ExceptionGroup("two", [ValueError("a"), ValueError("b")])
