"""The generic parser: every problem reported at once, with path, problem and fix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import pytest
from hyperframe.api.codec import check, dump, parse, parse_lenient
from hyperframe.api.errors import FieldError, SpecError
from hyperframe.api.fields import Format, spec_field, value_rules
from hyperframe.api.job import Frames, JobSpec, Parallelism
from hyperframe.api.kube import EnvVar
from hyperframe.api.runtime import PodDefaults, RuntimeImages, SmokePolicy

DIGEST = "sha256:" + "a" * 64


def errors_of(cls: type, obj: object) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse(cls, obj, path="spec")
    return {e.path: str(e) for e in info.value.errors}


def test_required_field_missing_names_path_and_expected_value() -> None:
    errs = errors_of(Parallelism, {})
    assert errs == {
        "spec.pipeline": "spec.pipeline: required field is missing: set it to an integer >= 1 and <= 512"
    }


def test_every_problem_is_reported_not_just_the_first() -> None:
    errs = errors_of(
        Frames, {"frames": 0, "microBatchSize": "two", "schedulePolicy": "pipedream", "extra": 1}
    )
    assert set(errs) == {"spec.frames", "spec.microBatchSize", "spec.schedulePolicy", "spec.extra"}
    assert "0 is below the minimum 1" in errs["spec.frames"]
    assert 'expected an integer, got string "two"' in errs["spec.microBatchSize"]
    assert "one of hyperframe, gpipe, 1f1b, interleaved1f1b, zbv" in errs["spec.schedulePolicy"]


def test_unknown_field_suggests_the_close_spelling() -> None:
    errs = errors_of(Frames, {"frames": 3, "schedulPolicy": "gpipe"})
    assert errs["spec.schedulPolicy"].endswith('(did you mean "schedulePolicy"?)')


def test_bool_is_not_an_integer_and_int_is_a_number() -> None:
    assert (
        "expected an integer, got boolean true" in errors_of(Parallelism, {"pipeline": True})["spec.pipeline"]
    )
    smoke = parse(SmokePolicy, {"minBusBandwidthGBps": 40}, path="spec")
    assert smoke.min_bus_bandwidth_gbps == 40.0 and isinstance(smoke.min_bus_bandwidth_gbps, float)


def test_maximum_is_enforced() -> None:
    assert "above the maximum 512" in errors_of(Parallelism, {"pipeline": 513})["spec.pipeline"]


def test_formats_are_checked_with_an_example_fix() -> None:
    errs = errors_of(RuntimeImages, {"base": "python:3.12", "framework": "repo@" + DIGEST})
    assert "is not an image reference pinned by digest" in errs["spec.base"]
    assert "@sha256:" in errs["spec.base"]


def test_list_items_and_duplicates_are_reported_with_indexes() -> None:
    assert "spec.nodes" in errors_of(JobSpec, {})
    with pytest.raises(SpecError) as info:
        parse(
            SmokePolicy,
            {"deviceChecks": ["visible", "visible"], "ncclMessageSizes": ["1Mi", "big"]},
            path="spec.smoke",
        )
    paths = info.value.paths()
    assert "spec.smoke.ncclMessageSizes[1]" in paths
    # Duplicates are only checked once every item parsed, so fix items first.
    with pytest.raises(SpecError) as info:
        parse(SmokePolicy, {"deviceChecks": ["visible", "visible"]}, path="spec.smoke")
    assert info.value.paths() == ["spec.smoke.deviceChecks[1]"]
    assert "duplicate entry (visible) also at index 0" in str(info.value)


def test_map_keyed_lists_reject_duplicate_keys() -> None:
    with pytest.raises(SpecError) as info:
        parse(
            JobSpec,
            {
                "runtimeRef": {"name": "r"},
                "nodes": 1,
                "gpusPerNode": 0,
                "procsPerNode": 1,
                "parallelism": {"pipeline": 1},
                "frames": {"frames": 1},
                "entrypoint": {"builtin": {"model": "tiny-gpt"}},
                "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
            },
            path="spec",
        )
    assert info.value.paths() == ["spec.env[1]"]
    assert "name=A" in str(info.value)


def test_quantity_accepts_integers_and_keeps_strings() -> None:
    smoke = parse(SmokePolicy, {"ncclMessageSizes": [1024, "1Mi"]}, path="s")
    assert smoke.nccl_message_sizes == ("1024", "1Mi")


def test_null_means_absent_so_defaults_apply() -> None:
    assert parse(Parallelism, {"pipeline": 2, "data": None}, path="s").data == 1


def test_not_an_object() -> None:
    errs = errors_of(Parallelism, [1, 2])
    assert errs == {"spec": "spec: expected an object, got a list: write a mapping of fields"}


def test_dump_round_trips_with_wire_names_and_no_nones() -> None:
    env = parse(EnvVar, {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}, path="e")
    assert dump(env) == {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    frames = parse(Frames, {"frames": 5}, path="f")
    assert parse(Frames, dump(frames), path="f") == frames
    assert "microBatchesPerFrame" in dump(frames) and "checkpoint" not in dump(frames)


def test_spec_error_formatting() -> None:
    err = SpecError([FieldError("spec.a", "is bad", "make it good"), FieldError("spec.b", "too", "also")])
    assert str(err) == "spec.a: is bad: make it good\nspec.b: too: also"
    assert err.paths() == ["spec.a", "spec.b"]
    with pytest.raises(ValueError, match="at least one"):
        SpecError([])


def test_list_length_bounds() -> None:
    assert (
        "has 0 items, fewer than 1"
        in errors_of(SmokePolicy, {"ncclMessageSizes": []})["spec.ncclMessageSizes"]
    )
    too_many = ["1Mi"] * 17
    assert "more than 16" in errors_of(SmokePolicy, {"ncclMessageSizes": too_many})["spec.ncclMessageSizes"]


def test_string_length_bound() -> None:
    errs = errors_of(EnvVar, {"name": "A" * 129})
    assert "is 129 characters, longer than 128" in errs["spec.name"]


def test_map_values_must_be_strings() -> None:

    errs = errors_of(PodDefaults, {"nodeSelector": {"gpu": True}})
    assert (
        "spec.nodeSelector.gpu" in errs
        and "expected a string, got boolean true" in errs["spec.nodeSelector.gpu"]
    )


def test_pass_through_objects_need_their_keys() -> None:
    errs = errors_of(JobSpec, {"volumes": [{"emptyDir": {}}]})
    assert "spec.volumes[0].name: required string field is missing: set name" in errs.values()


# -- lenient parsing: the same field model for formats another version of the project writes --


class _Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Item:
    index: int
    label: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wire:
    ok: bool
    size_bytes: int = 0
    colour: _Colour | None = None
    items: list[_Item] = field(default_factory=list)


def test_lenient_parse_keeps_what_is_good_and_names_the_rest() -> None:
    value, errors = parse_lenient(
        _Wire,
        {"size_bytes": "big", "colour": "blue", "items": [{"index": 1}, 7, {"label": "x"}], "newer": 1},
        fallback={_Wire: {"ok": False}},
    )
    assert value == _Wire(ok=False, colour=_Colour.BLUE, items=[_Item(index=1)])
    assert isinstance(value.colour, _Colour) and isinstance(value.items, list)
    assert [str(e) for e in errors] == [
        "ok: required field is missing: set it to true or false",
        'size_bytes: expected an integer, got string "big": use an integer',
        "items[1]: expected an object, got integer 7: write a mapping of fields",
        "items[2].index: required field is missing: set it to an integer",
    ]


def test_lenient_parse_without_a_fallback_for_a_required_field_gives_none() -> None:
    value, errors = parse_lenient(_Wire, {"ok": "yes"})
    assert value is None
    assert [e.path for e in errors] == ["ok"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Local:
    """A model with a format of its own, exclusive bounds, a set and a map of formatted values."""

    tag: str = spec_field("A tag.", fmt=Format(r"^v[0-9]+$", "a v-number", "v1"), default="v1")
    fraction: float = spec_field("A fraction.", default=0.5, minimum=0, maximum=1, exclusive_maximum=True)
    budget: float = spec_field("A budget.", default=1.0, minimum=0, exclusive_minimum=True)
    kinds: frozenset[Literal["a", "b"]] = spec_field("Kinds.", default=frozenset({"a"}))
    pins: Mapping[str, str] = spec_field(
        "Pins.", default_factory=dict, fmt=Format(r"^[0-9.]+$", "a version", "1.2")
    )


def test_a_model_of_its_own_declares_formats_exclusive_bounds_sets_and_map_values() -> None:
    value = parse(_Local, {"kinds": ["b", "a"], "pins": {"x": "1.0"}}, path="")
    assert value.kinds == frozenset({"a", "b"}) and value.pins == {"x": "1.0"}
    errs = errors_of(
        _Local,
        {"tag": "1", "fraction": 1, "budget": 0, "kinds": ["c"], "pins": {"x": "one"}, "tagg": 1},
    )
    assert list(errs.values()) == [
        'spec.tag: "1" is not a v-number: use a v-number, e.g. v1',
        "spec.fraction: 1 is not below the maximum 1: use a value < 1",
        "spec.budget: 0 is not above the minimum 0: use a value > 0",
        'spec.kinds[0]: unknown value string "c": use one of a, b',
        'spec.pins.x: "one" is not a version: use a version, e.g. 1.2',
        'spec.tagg: unknown field: remove it or fix the spelling (did you mean "tag"?)',
    ]


def test_an_unknown_field_at_the_top_is_named_without_a_leading_dot() -> None:
    with pytest.raises(SpecError) as info:
        parse(_Local, {"tags": "v1"}, path="")
    assert info.value.paths() == ["tags"]


def test_check_applies_the_declared_rules_to_a_model_built_in_python() -> None:
    assert check(_Local()) == []
    bad = _Local(tag="x", fraction=2.0, kinds=frozenset({"z"}))  # type: ignore[arg-type]
    assert [str(e) for e in check(bad, path="local")] == [
        'local.tag: "x" is not a v-number: use a v-number, e.g. v1',
        "local.fraction: 2 is not below the maximum 1: use a value < 1",
        'local.kinds[0]: unknown value string "z": use one of a, b',
    ]


@dataclass(frozen=True)
class _Figures:
    values: dict[str, float] = field(
        default_factory=dict, metadata=value_rules(max_items=2, max_key_length=3, finite=True)
    )


def test_a_map_is_bounded_in_entries_and_key_length_and_numbers_can_be_required_finite() -> None:
    assert parse(_Figures, {"values": {"a": 1, "bcd": 2.5}}, path="") == _Figures({"a": 1.0, "bcd": 2.5})
    for values, line in (
        ({"a": 1, "b": 2, "c": 3}, "values: has 3 entries, more than 2: give at most 2"),
        ({"long": 1}, 'values: key "long" is 4 characters: use 1 to 3 characters'),
        ({"a": float("nan")}, "values.a: nan is not a finite number: use a finite number"),
        ({"a": float("-inf")}, "values.a: -inf is not a finite number: use a finite number"),
    ):
        with pytest.raises(SpecError) as info:
            parse(_Figures, {"values": values}, path="")
        assert str(info.value) == line


def test_a_map_past_the_crds_max_properties_is_refused_by_the_codec_too() -> None:
    # The CRD's schema says maxProperties: 32; before, only the API server refused 33 entries.
    selector = {f"k{i}": "v" for i in range(33)}
    assert errors_of(PodDefaults, {"nodeSelector": selector}) == {
        "spec.nodeSelector": "spec.nodeSelector: has 33 entries, more than 32: give at most 32"
    }
