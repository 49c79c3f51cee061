"""Typed identities: a static token and an access token of one name, or two issuers' subjects of one
name, are never one identity, in equality, in the key that sealed ids and Redis carry, or in a share."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.identity.fair_share import FairShare
from gateway.identity.principal import LOCAL, Identity

IDP, OTHER_IDP = "https://idp.example.com", "https://other.example.com"


def test_a_token_and_a_person_of_one_name_are_two_identities() -> None:
    token, person = Identity.token("ci"), Identity.access_token(IDP, "ci", {"groups": ["eng"]})
    elsewhere = Identity.access_token(OTHER_IDP, "ci", {})
    assert len({token, person, elsewhere, LOCAL}) == 4
    assert len({i.key for i in (token, person, elsewhere, LOCAL)}) == 4
    assert person == Identity.access_token(IDP, "ci", {"groups": ["sales"]})  # claims are no part of who


def test_each_identity_has_its_own_share() -> None:
    share = FairShare(total=10, per_identity=1)
    share.acquire(Identity.token("ci"))
    assert share.refusal(Identity.token("ci")) is not None
    assert share.refusal(Identity.access_token(IDP, "ci", {})) is None


@given(st.text(), st.text(), st.text(), st.text())
def test_keys_never_collide_across_issuers_and_subjects(issuer: str, subject: str, issuer2: str, subject2: str) -> None:
    one, two = Identity.access_token(issuer, subject, {}), Identity.access_token(issuer2, subject2, {})
    assert (one.key == two.key) == ((issuer, subject) == (issuer2, subject2))
    assert one.key != Identity.token(subject).key


@pytest.mark.anyio
@pytest.mark.parametrize(("claims", "said"), [({}, "it names no issuer"), ({"sub": "x"}, "it names no issuer")])
async def test_a_token_that_names_no_issuer_is_told_so(claims: dict[str, object], said: str) -> None:
    """An operator's tester: a JWT without ``iss`` was refused as "issued by None, which is not a
    configured issuer"."""
    import jwt

    from gateway.config import AuthSettings
    from gateway.identity.access_tokens import AccessTokenValidator, TokenRejected

    settings = AuthSettings.model_validate(
        {"resource": "http://127.0.0.1:9/mcp", "issuers": [{"issuer": "https://issuer.example"}]}
    )
    token = jwt.encode(claims, "a secret of thirty-two bytes or more!", algorithm="HS256")
    with pytest.raises(TokenRejected, match=said):
        await AccessTokenValidator(settings).validate(token)
