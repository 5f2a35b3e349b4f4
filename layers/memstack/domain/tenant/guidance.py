"""What a tenant's configuration asks of extraction, filters and retrieval: its categories, its rules.

``guidance_of`` turns the configuration into the ``Guidance`` every extractor
takes (ports.llm); ``check_categories`` holds a filter or a written memory to
the tenant's categories (a clear 422 naming them otherwise);
``category_descriptions`` are what retrieval's category affinity embeds.
"""

from __future__ import annotations

from collections.abc import Iterable

from memstack.domain import filter_expr
from memstack.domain.categories import DESCRIPTIONS
from memstack.domain.tenant.config import TenantConfig
from memstack.errors import ValidationFailed
from memstack.models import MemoryFilters
from memstack.ports.llm import CategoryChoice, Guidance


def guidance_of(config: TenantConfig) -> Guidance:
    """The tenant's categories and instructions as every extractor reads them."""
    sections = config.categories
    return Guidance(
        custom=tuple(CategoryChoice(c.name, c.description, tuple(c.keywords)) for c in sections.custom),
        built_in=sections.mode == "extend",
        instructions=config.extraction.instructions,
    )


def check_categories(config: TenantConfig, names: Iterable[str], field: str, location: str = "body") -> None:
    """``ValidationFailed`` (422) when a name is not one of the tenant's categories (sent in ``location``)."""
    allowed = config.categories.names()
    unknown = sorted({n for n in names if n not in allowed})
    if not unknown:
        return
    listed = ", ".join(allowed)
    raise ValidationFailed(
        f"{field}: {', '.join(repr(n) for n in unknown)} is not a category of this tenant (one of {listed}; "
        "add your own under categories.custom with PATCH /v1/config)",
        [{"field": field, "location": location, "message": "unknown category", "type": "unknown_category"}],
    )


def check_filters(config: TenantConfig, filters: MemoryFilters, location: str = "body") -> None:
    """The categories a listing (its query) or search (its body) filters on must be the tenant's."""
    if filters.category is not None:
        check_categories(config, [filters.category], "category", location)
    if filters.where is not None:
        check_categories(config, filter_expr.categories_named(filters.where), "where.category", location)


def category_descriptions(config: TenantConfig) -> tuple[str, ...] | None:
    """What retrieval's category affinity embeds for this tenant; None: the built-in descriptions."""
    sections = config.categories
    if not sections.custom:
        return None
    own = tuple(f"{c.description} ({c.name.replace('_', ' ')})" for c in sections.custom)
    return (*DESCRIPTIONS, *own) if sections.mode == "extend" else own
