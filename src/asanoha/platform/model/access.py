"""Access rules. Default deny: a handler without a rule cannot be defined."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.users import SessionUser


@dataclass(frozen=True, init=False)
class Access:
    """Who may call a handler.

    ``roles`` admits a caller holding any of them; ``open_to_all`` (a reason) admits every
    authenticated, non-anonymous caller; ``public`` (a reason) admits anonymous callers too.
    ``public_intake`` lets an anonymous root call write personal fields.
    """

    roles: frozenset[str] = field(default_factory=frozenset)
    open_to_all: str | None = None
    public: str | None = None
    public_intake: bool = False

    def __init__(
        self,
        roles: Iterable[str] = (),
        *,
        open_to_all: str | None = None,
        public: str | None = None,
        public_intake: bool = False,
    ) -> None:
        if isinstance(roles, str | bytes):
            # frozenset("Admin") would be the roles A, d, m, i, n.
            raise DefinitionError(
                f"Access(roles={roles!r}) takes a list of role names: "
                f"write Access(roles=[{roles!r}])"
            )
        roles = frozenset(roles)
        for role in roles:
            if not isinstance(role, str) or not role.strip():
                raise DefinitionError(
                    f"Access(roles=...) names the role {role!r}; roles are non-blank strings"
                )
        object.__setattr__(self, "roles", roles)
        object.__setattr__(self, "open_to_all", open_to_all)
        object.__setattr__(self, "public", public)
        object.__setattr__(self, "public_intake", public_intake)

    def admits(self, user: SessionUser) -> bool:
        """Whether ``user`` may call a handler guarded by this rule."""
        if self.public is not None and self.public.strip():
            return True
        if user.is_anonymous:
            return False
        if self.open_to_all is not None and self.open_to_all.strip():
            return True
        return not self.roles.isdisjoint(user.roles)

    def describe(self) -> str:
        """A short text for error messages: which callers this rule admits."""
        if self.public:
            return "everyone"
        if self.open_to_all:
            return "every signed-in caller"
        return "roles " + ", ".join(sorted(self.roles)) if self.roles else "nobody"


def check_access(access: Access | None, qn: str) -> Access:
    """Fail at definition time when ``qn`` has no usable access rule."""
    if access is None:
        raise DefinitionError(
            f"{qn} declares no access rule; pass access=Access(roles=[...]) "
            "or Access(open_to_all='<reason>')"
        )
    if not isinstance(access, Access):
        raise DefinitionError(f"{qn}: access must be an Access(...), got {access!r}")
    if access.open_to_all is not None and not access.open_to_all.strip():
        raise DefinitionError(f"{qn}: Access(open_to_all=...) needs a non-blank reason")
    if access.public is not None and not access.public.strip():
        raise DefinitionError(f"{qn}: Access(public=...) needs a non-blank reason")
    if not access.roles and access.open_to_all is None and access.public is None:
        raise DefinitionError(f"{qn}: Access() admits nobody; list roles or give open_to_all")
    return access
