"""A tenant's configuration: the document ``GET/PUT/PATCH /v1/config`` reads and writes.

The document is made of **sections**, each a small pydantic model with its
defaults and its checks (a missing section is its defaults). Stores keep the
document as opaque JSON (``ports.tenant_config``): a new section is one more
field of ``TenantConfig`` (and its model), with no store change.

- ``categories``: the tenant's own memory categories, beside the 15 built-in
  ones (``mode: extend``) or instead of them (``mode: replace``). Each has a
  description (what LLM extractors and retrieval's category affinity read) and
  keywords (what the offline extractor matches, as it matches the built-in
  lexicon).
- ``extraction``: what to remember and what to ignore. ``instructions`` is
  free text for the LLM providers' prompt; ``ignore`` / ``only`` are rules
  every extractor's result is held to (categories and keywords), the offline
  one included.
- ``webhooks``: where the tenant's events go (``url``), the key that signs
  them (``secret``) and which events (``events``); ``domain/webhooks``.

Secrets (a section's ``Secret`` field) are masked in what the API shows and
kept in what is stored: ``public()`` vs ``stored()``.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SecretStr,
    SerializationInfo,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memstack.domain.webhooks.events import EventType
from memstack.domain.webhooks.signature import SECRET_PATTERN
from memstack.errors import ValidationFailed
from memstack.models import BUILT_IN_CATEGORIES, CATEGORY_PATTERN

logger = logging.getLogger(__name__)  # configured at the edges (memstack.logs)

CategoryName = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=40, pattern=CATEGORY_PATTERN)
]
#: a keyword or phrase matched in text (case-insensitive)
Term = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]
#: the largest stored document, as compact JSON (a DynamoDB item holds 400 KB; a prompt should stay small)
MAX_DOCUMENT_BYTES = 65_536
MAX_CUSTOM_CATEGORIES = 50
SECRET_MASK = "**********"
#: validation context of a document read back from the API (a client): its secrets are the mask
READ_BACK = {"masked_secrets": True}


def _secret_value(value: SecretStr, info: SerializationInfo) -> str:
    context = info.context if isinstance(info.context, dict) else {}
    return value.get_secret_value() if context.get("reveal_secrets") else SECRET_MASK


#: a secret a section keeps (a webhook's signing key): stored as given, shown masked
Secret = Annotated[SecretStr, PlainSerializer(_secret_value, return_type=str)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CustomCategory(_Section):
    name: CategoryName = Field(description="lower-case words joined by '_', e.g. 'pets' or 'support_tickets'")
    description: str = Field(
        min_length=1,
        max_length=300,
        description="what belongs here, in plain words: LLM extractors and retrieval read it",
    )
    keywords: list[Term] = Field(
        default_factory=list,
        max_length=50,
        description="words and phrases the offline extractor matches (single words with their "
        "inflections: 'dog' matches 'dogs'); the name's own words count too",
    )


class CategoriesSection(_Section):
    mode: Literal["extend", "replace"] = Field(
        "extend", description="extend: the 15 built-in categories and these; replace: only these"
    )
    custom: list[CustomCategory] = Field(default_factory=list, max_length=MAX_CUSTOM_CATEGORIES)

    @model_validator(mode="after")
    def _distinct(self) -> CategoriesSection:
        names = [c.name for c in self.custom]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"custom category names must be distinct; repeated: {', '.join(repeated)}")
        if self.mode == "extend":
            clash = [n for n in names if n in BUILT_IN_CATEGORIES]
            if clash:
                raise ValueError(
                    f"{', '.join(clash)} already is a built-in category; give another name, "
                    "or use mode 'replace' to define the whole set yourself"
                )
        elif not names:
            raise ValueError("mode 'replace' needs at least one custom category")
        return self

    def names(self) -> tuple[str, ...]:
        """Every category a memory of this tenant may have: the built-in ones first (extend)."""
        own = tuple(c.name for c in self.custom)
        return own if self.mode == "replace" else (*BUILT_IN_CATEGORIES, *own)


class TopicRules(_Section):
    categories: list[CategoryName] = Field(
        default_factory=list, max_length=100, description="the tenant's categories (built-in or custom)"
    )
    keywords: list[Term] = Field(
        default_factory=list,
        max_length=100,
        description="words and phrases, matched in a memory's text as category keywords are",
    )

    def empty(self) -> bool:
        return not self.categories and not self.keywords


class ExtractionSection(_Section):
    instructions: str = Field(
        "",
        max_length=4000,
        description="what to remember and what to leave out, in plain words; LLM extractors follow it "
        "(the offline extractor cannot read it: use ignore / only)",
    )
    ignore: TopicRules = Field(
        default_factory=TopicRules,
        description="a memory in one of these categories or with one of these words is never stored",
    )
    only: TopicRules = Field(
        default_factory=TopicRules,
        description="when not empty: only memories in one of these categories or with one of these "
        "words are stored",
    )


def _receiver_url(url: str) -> str:
    """An absolute http(s) URL with a host, without credentials or a fragment (the outbound policy,
    https and public addresses, is the deployment's and is applied when a delivery is made)."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("must be an absolute https:// URL")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry a user name or password (the signature authenticates memstack)")
    if parts.fragment:
        raise ValueError("must not have a #fragment")
    return url


class WebhooksSection(_Section):
    url: Annotated[str, StringConstraints(max_length=2000), AfterValidator(_receiver_url)] | None = Field(
        None, description="where events are POSTed (https; see the outbound policy in docs/api.md)"
    )
    secret: Secret | None = Field(
        None,
        description="the signing key, 'whsec_' and the base64 of 24-64 random bytes (shown masked; "
        "memstack.domain.webhooks.signature.new_secret() makes one)",
    )
    events: list[EventType] = Field(
        default_factory=list,
        max_length=4,
        description="which events to send: memory.created, memory.updated, memory.deleted, job.failed",
    )

    @model_validator(mode="after")
    def _complete(self, info: ValidationInfo) -> WebhooksSection:
        read_back = isinstance(info.context, dict) and info.context.get("masked_secrets")
        secret = None if self.secret is None else self.secret.get_secret_value()
        if secret is not None and not (
            re.fullmatch(SECRET_PATTERN, secret) or (read_back and secret == SECRET_MASK)
        ):
            raise ValueError(
                "webhooks.secret must be 'whsec_' and the base64 of 24-64 random bytes (a masked "
                f"{SECRET_MASK!r} read back is not the secret: send the secret itself, or PATCH the "
                "other sections)"
            )
        if self.events and (self.url is None or self.secret is None):
            raise ValueError("webhooks.events needs webhooks.url and webhooks.secret")
        if len(set(self.events)) != len(self.events):
            raise ValueError("webhooks.events names an event twice")
        return self


class TenantConfig(_Section):
    """The whole document; every section is optional (absent: its defaults)."""

    categories: CategoriesSection = Field(default_factory=CategoriesSection)
    extraction: ExtractionSection = Field(default_factory=ExtractionSection)
    webhooks: WebhooksSection = Field(default_factory=WebhooksSection)

    # A field validator (not the model's), so a 422 names the extraction section, not the whole body;
    # categories is declared first, so it has been validated (absent from data when it was invalid).
    @field_validator("extraction")
    @classmethod
    def _known_categories(cls, extraction: ExtractionSection, info: ValidationInfo) -> ExtractionSection:
        categories = info.data.get("categories")
        if categories is None:
            return extraction
        allowed = set(categories.names())
        for rules in ("ignore", "only"):
            unknown = [c for c in getattr(extraction, rules).categories if c not in allowed]
            if unknown:
                raise ValueError(
                    f"extraction.{rules}.categories names {', '.join(unknown)}, not a category of this "
                    "tenant (built-in or under categories.custom)"
                )
        return extraction

    def public(self) -> dict[str, Any]:
        """What the API shows: every section with its defaults, secrets masked."""
        return self.model_dump(mode="json")

    def stored(self) -> dict[str, Any]:
        """What the store keeps: only what differs from the defaults, secrets as given."""
        return self.model_dump(mode="json", exclude_defaults=True, context={"reveal_secrets": True})

    @classmethod
    def checked(cls, document: Any) -> TenantConfig:
        """A document a caller sent, or ``ValidationFailed`` (422) saying what is wrong where."""
        if not isinstance(document, dict):
            raise ValidationFailed("the configuration must be a JSON object of sections")
        try:
            config = cls.model_validate(document)
        except ValidationError as exc:
            raise ValidationFailed.of(exc.errors(include_url=False, include_input=False)) from exc
        size = len(json.dumps(config.stored(), separators=(",", ":")).encode())
        if size > MAX_DOCUMENT_BYTES:
            raise ValidationFailed(
                f"the configuration is {size} bytes as JSON; at most {MAX_DOCUMENT_BYTES} are kept"
            )
        return config

    @classmethod
    def from_stored(cls, document: dict[str, Any]) -> TenantConfig:
        """The stored document; a section this version does not know (written by a newer one) is left out."""
        unknown = sorted(set(document) - set(cls.model_fields))
        if unknown:
            logger.warning({"event": "tenant_config_unknown_sections", "sections": unknown})
        return cls.model_validate({k: v for k, v in document.items() if k in cls.model_fields})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged
