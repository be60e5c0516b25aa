"""Access rules. Default deny: a handler without a rule cannot be defined.

An ``Access`` guards a handler (who may call it), and on the standard handlers of an entity
also its rows (``owner=``: whose rows a caller sees and changes); on a field it guards the
field's reads (``read=``) and writes (``write=``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.sync_callables import check_not_async
from asanoha.platform.model.users import SessionUser

if TYPE_CHECKING:
    from asanoha.platform.model.fields import Field

#: ``owner(row, user) -> bool``: whether ``user`` owns ``row``.
OwnerCheck = Callable[[Mapping[str, Any], SessionUser], bool]
#: The base column an owner rule may name: the id of the user who created the row.
OWNER_BASE_COLUMNS = frozenset({"created_by"})
#: Field kinds that can hold a user id.
OWNER_FIELD_KINDS = frozenset({"text", "reference"})


@dataclass(frozen=True, init=False)
class Access:
    """Who may call a handler, and on the standard handlers of an entity whose rows.

    ``roles`` admits a caller holding any of them; ``open_to_all`` (a reason) admits every
    authenticated, non-anonymous caller; ``public`` (a reason) admits anonymous callers too.
    ``public_intake`` lets an anonymous root call write personal fields.

    ``owner`` (standard handlers only) confines the caller to the rows it owns: the name of
    a field or base column holding the owner's user id (``"created_by"``), or a function
    ``(row, user) -> bool``. A caller holding one of ``bypass_roles`` sees and changes every
    row of its tenant.
    """

    roles: frozenset[str] = field(default_factory=frozenset)
    open_to_all: str | None = None
    public: str | None = None
    public_intake: bool = False
    owner: str | OwnerCheck | None = None
    bypass_roles: frozenset[str] = field(default_factory=frozenset)

    def __init__(
        self,
        roles: Iterable[str] = (),
        *,
        open_to_all: str | None = None,
        public: str | None = None,
        public_intake: bool = False,
        owner: str | OwnerCheck | None = None,
        bypass_roles: Iterable[str] = (),
    ) -> None:
        is_name = isinstance(owner, str) and bool(owner.strip())
        if owner is not None and not callable(owner) and not is_name:
            raise DefinitionError(
                f"Access(owner={owner!r}) names the field that holds the owner's user id "
                "(owner='created_by') or is a function (row, user) -> bool"
            )
        bypass = _role_names("bypass_roles", bypass_roles)
        if bypass and owner is None:
            raise DefinitionError(
                f"Access(bypass_roles={sorted(bypass)!r}) without owner=... bypasses nothing; "
                "declare owner='<field>' or leave bypass_roles out"
            )
        object.__setattr__(self, "roles", _role_names("roles", roles))
        object.__setattr__(self, "open_to_all", open_to_all)
        object.__setattr__(self, "public", public)
        object.__setattr__(self, "public_intake", public_intake)
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "bypass_roles", bypass)

    def admits(self, user: SessionUser) -> bool:
        """Whether ``user`` may call a handler guarded by this rule."""
        if self.public is not None and self.public.strip():
            return True
        if user.is_anonymous:
            return False
        if self.open_to_all is not None and self.open_to_all.strip():
            return True
        return not self.roles.isdisjoint(user.roles)

    def bypasses_owner(self, user: SessionUser) -> bool:
        """Whether ``user`` holds a role that sees every row despite ``owner``."""
        return not self.bypass_roles.isdisjoint(user.roles)

    def describe(self) -> str:
        """A short text for error messages: which callers this rule admits."""
        if self.public:
            return "everyone"
        if self.open_to_all:
            return "every signed-in caller"
        return "roles " + ", ".join(sorted(self.roles)) if self.roles else "nobody"


def _role_names(option: str, roles: Iterable[str]) -> frozenset[str]:
    if isinstance(roles, str | bytes):
        # frozenset("Admin") would be the roles A, d, m, i, n.
        raise DefinitionError(
            f"Access({option}={roles!r}) takes a list of role names: "
            f"write Access({option}=[{roles!r}])"
        )
    names = frozenset(roles)
    for role in names:
        if not isinstance(role, str) or not role.strip():
            raise DefinitionError(
                f"Access({option}=...) names the role {role!r}; roles are non-blank strings"
            )
    return names


def check_access(
    access: Access | None, qn: str, *, fields: Mapping[str, Field] | None = None
) -> Access:
    """Fail at definition time when ``qn`` has no usable access rule.

    ``fields`` are the fields of the entity whose standard handler ``qn`` is; only such a
    handler may declare ``owner=``, which must name one of them (or ``created_by``).
    """
    if access is None:
        raise DefinitionError(
            f"{qn} declares no access rule; pass access=Access(roles=[...]) "
            "or Access(open_to_all='<reason>')"
        )
    if not isinstance(access, Access):
        raise DefinitionError(f"{qn}: access must be an Access(...), got {access!r}")
    _check_admission(access, qn)
    if access.owner is not None:
        if fields is None:
            raise DefinitionError(
                f"{qn}: Access(owner=...) applies to the standard handlers of an entity "
                "(feature.crud(..., read=Access(..., owner=...))); a custom handler reaches "
                "the entity's owner rule through ctx.entity(...). Leave owner= out here"
            )
        check_owner(access.owner, fields, qn)
    return access


def _check_admission(access: Access, where: str) -> None:
    if access.open_to_all is not None and not access.open_to_all.strip():
        raise DefinitionError(f"{where}: Access(open_to_all=...) needs a non-blank reason")
    if access.public is not None and not access.public.strip():
        raise DefinitionError(f"{where}: Access(public=...) needs a non-blank reason")
    if not access.roles and access.open_to_all is None and access.public is None:
        raise DefinitionError(f"{where}: Access() admits nobody; list roles or give open_to_all")


def check_owner(owner: str | OwnerCheck, fields: Mapping[str, Field], qn: str) -> None:
    """Fail unless ``owner`` names ``created_by`` or a text or reference field of the
    entity, or is a function taking ``(row, user)``."""
    if callable(owner):
        check_not_async(owner, qn, "owner function", "an owner is asked per row in the call")
        try:
            inspect.signature(owner).bind(None, None)
        except TypeError:
            raise DefinitionError(
                f"{qn}: Access(owner={owner!r}) is called as owner(row, user) -> bool; "
                "give it those two parameters"
            ) from None
        except ValueError:
            pass  # a builtin without a signature: trusted as declared
        return
    if owner in OWNER_BASE_COLUMNS:
        return
    declared = fields.get(owner)
    if declared is None:
        raise DefinitionError(
            f"{qn}: Access(owner={owner!r}) names no field of the entity; name a text or "
            f"reference field that holds the owner's user id, or 'created_by' "
            f"(fields: {sorted(fields)})"
        )
    if declared.kind not in OWNER_FIELD_KINDS:
        raise DefinitionError(
            f"{qn}: Access(owner={owner!r}) names a field of kind {declared.kind}; an owner field "
            "holds a user id: a text or reference field, or 'created_by'"
        )
    if declared.is_personal:
        raise DefinitionError(
            f"{qn}: Access(owner={owner!r}) names a personal field; rows are looked up by the "
            "caller's user id, which an encrypted value cannot be compared with: declare it "
            "personal=False, reason='the owner's user id'"
        )


def check_field_access(access: Access | None, option: str, where: str) -> None:
    """Fail when a field's ``read=``/``write=`` rule cannot serve as one."""
    if access is None:
        return
    if not isinstance(access, Access):
        raise DefinitionError(f"{where}: {option}= must be an Access(...), got {access!r}")
    _check_admission(access, f"{where} ({option}=)")
    if access.owner is not None:
        raise DefinitionError(
            f"{where}: {option}=Access(owner=...) is not served on a field; owner= belongs on "
            "the entity's standard handlers (feature.crud(..., read=Access(..., owner=...)))"
        )
