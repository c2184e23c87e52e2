"""The jinja2 environment: templates lay out the manifests, Python computes the values.

Every value is written with the ``j`` filter (JSON, a subset of YAML), so no string in a job
can break the YAML structure; templates never format values by hand.
"""

from __future__ import annotations

import json
from typing import Any

import jinja2
import yaml

__all__ = ["render_template"]

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("hyperframe.render", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # YAML, not HTML; values are JSON-encoded by the j filter instead
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    auto_reload=False,  # the templates ship with the package: no stat of each file per render
)
_ENV.filters["j"] = lambda value: json.dumps(value, ensure_ascii=False)

# libyaml's loader is ~10x faster than the pure-Python one; a 1000-node job renders 1000 pods.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def render_template(template: str, /, **values: Any) -> dict[str, Any]:
    """Render one template and parse the YAML back into an object."""
    text = _ENV.get_template(template).render(**values)
    obj = yaml.load(text, Loader=_LOADER)
    if not isinstance(obj, dict):
        raise TypeError(f"template {template} did not produce a mapping")
    return obj
