"""Schema-driven normalization: walk a value along a JSON-schema-like description.

A schema names a value type with `type` or, taking precedence, `format`
(`{"type": "number", "format": "currency"}` is a currency); `array` schemas
describe their `items`, `object` schemas their `properties`. A list where the
schema expects one value is a set of alternatives ("any of these").

`strict=True` is for expected values (a task that cannot be normalized is a
broken task: raise); `strict=False` is for what an agent or a web site sent:
whatever cannot be normalized stays raw and then simply fails to compare equal.
The walk reproduces the reference's rules, including its quirks (a string
that holds a JSON list is read as that list where a list is expected;
properties without a schema are plain strings), because verdicts depend on them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from webarena_live.evaluator.errors import NormalizationError, UnknownValueTypeError
from webarena_live.evaluator.values.base import DerenderUrl, Normalized

KindLookup = Callable[[str], type[Normalized]]


def schema_kind(schema: Mapping[str, Any]) -> tuple[str | Mapping[str, Any], bool]:
    """(kind, is_array): the value type a schema describes, and whether it is a list of them.

    For objects (or lists of objects) the kind is the object schema itself.
    """
    if not isinstance(schema, Mapping):
        raise NormalizationError(f"a schema must be an object, got {type(schema).__name__}")
    declared = schema.get("type")
    if declared == "array":
        kind, _ = schema_kind(schema.get("items", {}))
        return kind, True
    if declared == "object":
        return schema, False
    return schema.get("format") or declared or "string", False


def item_kind(schema: Mapping[str, Any] | None) -> str:
    """The kind of one list item: `format` first, then `type`, default string."""
    if schema is None:
        return "string"
    return schema.get("format") or schema.get("type", "string")


class Walker:
    """One normalization pass: the strictness, the URL de-renderer and the type lookup."""

    def __init__(self, lookup: KindLookup, *, strict: bool, derender_url: DerenderUrl | None) -> None:
        self.lookup = lookup
        self.strict = strict
        # The de-renderer is strict exactly when the walk is (text folding always asks for a lenient
        # one): a URL value in an expected answer that matches no configured site is a broken task.
        self.derender_url = partial(derender_url, strict=strict) if derender_url is not None else None

    def make(self, kind: str, value: Any, **options: Any) -> Any:
        """One value of a known kind; a raw value back when lenient and it does not parse."""
        cls = self.lookup(kind)  # an unknown kind is a schema error, raised even when lenient
        try:
            return cls(value, derender_url=self.derender_url, **options)
        except Exception as error:
            if self.strict:
                if isinstance(error, NormalizationError):
                    raise
                raise NormalizationError(f"cannot read {value!r} as {kind}: {error}") from error
            return value

    def value(self, value: Any, schema: Mapping[str, Any] | None) -> Any:
        """The reference's top-level entry: nothing for empty values, else by the schema's shape."""
        if not value:
            return None
        if not schema:
            if isinstance(value, Mapping):
                schema = {"type": "object"}
            elif isinstance(value, list | tuple):
                schema = {"type": "array"}
            else:
                schema = {}
        kind, is_array = schema_kind(schema)
        if isinstance(kind, Mapping):
            return self.objects(value, kind)
        if is_array:
            if not isinstance(value, list | tuple):
                if self.strict:
                    raise NormalizationError(f"expected a list, got {type(value).__name__}: {value!r}")
                return value
            return self.items(value, kind)
        return self.make(kind, value)

    def items(self, value: Any, kind: str | Mapping[str, Any]) -> Any:
        """Each item of a list as `kind` (items that are lists are alternatives)."""
        if isinstance(value, str):
            value = _json_or_same(value, list)
        if not isinstance(value, list | tuple):
            if self.strict:
                raise NormalizationError(f"expected a list, got {type(value).__name__}: {value!r}")
            return value
        if isinstance(kind, Mapping):
            return self.objects(value, kind)
        self.lookup(kind)
        return tuple(self.make(kind, item) for item in value)

    def objects(self, value: Any, schema: Mapping[str, Any]) -> Any:
        """An object, or each object of a list, by the object schema."""
        if isinstance(value, list | tuple):
            return tuple(self.one_object(item, schema) for item in value)
        return self.one_object(value, schema)

    def one_object(self, value: Any, schema: Mapping[str, Any]) -> Any:
        if isinstance(value, MappingProxyType):
            value = dict(value)
        elif isinstance(value, str):
            value = _json_or_same(value, dict)
        if not isinstance(value, dict):
            if self.strict:
                raise NormalizationError(f"expected an object, got {type(value).__name__}: {value!r}")
            return value
        properties = schema.get("properties", {})
        result: dict[str, Any] = {}
        for name, item in value.items():
            result[name] = None if item is None else self.property(item, properties.get(name))
        return result

    def property(self, value: Any, schema: Mapping[str, Any] | None) -> Any:
        """One property of an object; properties the schema does not describe are plain strings."""
        try:
            if schema is None:
                return self.lookup("string")(value, derender_url=self.derender_url)
            kind, is_array = schema_kind(schema)
            if is_array:
                return self.items(value, kind)
            if isinstance(kind, Mapping):
                return self.one_object(value, kind)
            try:
                cls = self.lookup(kind)
            except UnknownValueTypeError:
                cls = self.lookup("string")  # unknown formats inside objects fall back to text
            return cls(value, derender_url=self.derender_url)
        except Exception as error:
            if self.strict:
                if isinstance(error, NormalizationError):
                    raise
                raise NormalizationError(f"cannot normalize property value {value!r}: {error}") from error
            return value

    def response_items(self, value: Any, schema: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
        """The list of an agent's (or task's) retrieved data, by the task's `results_schema`."""
        if not self.strict:
            if isinstance(value, str):
                value = _json_or_same(value, list)
            if not isinstance(value, list | tuple):
                value = (value,)
        if not isinstance(value, list | tuple):
            raise NormalizationError(f"expected a list, got {type(value).__name__}: {value!r}")
        items_schema: Mapping[str, Any] | None = None
        if schema is not None:
            declared = schema.get("type", "array")
            if declared != "array":
                # e.g. a task whose results_schema is {"type": "null"} receiving data: the
                # reference cannot normalize it and reports an error, not a failure.
                raise NormalizationError(f"results_schema must describe an array, it describes {declared!r}")
            items_schema = schema.get("items", {})
        if items_schema is not None and items_schema.get("type", "string") == "object":
            return tuple(self.objects(item, items_schema) for item in value)
        kind = item_kind(items_schema)
        return tuple(self.make(kind, item) for item in value)


def _json_or_same(text: str, wanted: type) -> Any:
    """`text` parsed as JSON when it holds a `wanted` (list or dict), else `text` unchanged."""
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text
    return parsed if isinstance(parsed, wanted) else text
