"""Griffe extension for the API reference: Sphinx roles become links, mechanisms get signatures.

The docstrings cite each other with Sphinx roles (``:func:`recommended_n_components```), which
Markdown would print literally. Each role becomes its name in code, wrapped in an *optional*
cross-reference to the object it names (looked up from the docstring's own scope, then from its
module, then as an absolute path): a link where that object has a page in the reference, plain
code elsewhere (private helpers, NumPy), never a broken link.

A mechanism's constructor takes its schema's parameters as keywords (``Mechanism.__init__(**kwargs)``,
checked against ``params``), so the reference shows the signature the schema defines: each
:class:`dpcore.schema.Param` with its kind and default, then the arguments every mechanism takes.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|obj|exc|const):`(~?)([\w.]+)(\(\))?`")


def _member(scope: griffe.Object | griffe.Alias, dotted: str) -> griffe.Object | griffe.Alias | None:
    obj: Any = scope
    for part in dotted.split("."):
        try:
            obj = obj.members[part]
        except (KeyError, AttributeError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
    return obj


def _resolve(obj: griffe.Object, pkg: griffe.Module, target: str) -> str | None:
    scopes: list[Any] = []
    scope: Any = obj
    while scope is not None:
        scopes.append(scope)
        scope = scope.parent
    found = None
    if target.startswith(pkg.name + "."):
        found = _member(pkg, target[len(pkg.name) + 1:])
    for scope in scopes:
        if found is None:
            found = _member(scope, target)
    if found is None:
        return None
    try:
        return found.final_target.path if isinstance(found, griffe.Alias) else found.path
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _rewrite(obj: griffe.Object, pkg: griffe.Module) -> None:
    if obj.docstring is not None:
        def link(m: re.Match[str]) -> str:
            short, target = m.group(1) == "~", m.group(2).lstrip(".")
            label = (target.rsplit(".", 1)[-1] if short else target) + (m.group(3) or "")
            path = _resolve(obj, pkg, target)
            code = f"<code>{label}</code>"
            return f'<autoref identifier="{path}" optional>{code}</autoref>' if path else code

        obj.docstring.value = ROLE.sub(link, obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member, pkg)


KIND = {"float": "float", "int": "int", "bool": "bool", "fraction_split": "tuple[float, ...]"}
COMMON = {"bounds": "ArrayLike | None", "label_bounds": "tuple[float, float] | None",
          "classes": "Sequence | None", "task": "str | None",
          "random_state": "int | np.random.Generator | None"}


def _schema_signature(cls: griffe.Class) -> None:
    from dpcore.mechanisms.base import COMMON_ARGS, Mechanism

    runtime = getattr(importlib.import_module(cls.module.path), cls.name, None)
    if not (isinstance(runtime, type) and issubclass(runtime, Mechanism) and runtime.name):
        return
    params = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for p in runtime.params:
        kind = (" | ".join(repr(c) for c in p.choices) if p.kind == "choice" and p.choices
                else KIND.get(p.kind, "Any"))
        annotation = f"{kind} | None" if p.optional and "None" not in kind else kind
        params.append(griffe.Parameter(p.name, annotation=annotation, default=repr(p.default),
                                       kind=griffe.ParameterKind.keyword_only))
    for name in (*COMMON_ARGS, *runtime.extra_args):
        params.append(griffe.Parameter(name, annotation=COMMON.get(name, "Any"), default="None",
                                       kind=griffe.ParameterKind.keyword_only))
    cls.set_member("__init__", griffe.Function("__init__", parameters=griffe.Parameters(*params),
                                               returns="None", lineno=cls.lineno))


def _mechanism_classes(mod: griffe.Module) -> None:
    for member in mod.members.values():
        if member.is_alias:
            continue
        if member.is_module:
            _mechanism_classes(member)
        elif member.is_class and not member.name.startswith("_"):
            _schema_signature(member)


class SphinxRoles(griffe.Extension):
    """Rewrite ``:role:`target``` in every docstring; give each mechanism its schema's signature."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _rewrite(pkg, pkg)
        if "mechanisms" in pkg.members:
            _mechanism_classes(pkg["mechanisms"])
