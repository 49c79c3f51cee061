from gateway.identity.fair_share import FairShare, default_share


def test_an_identity_at_its_share_is_refused_while_others_have_room() -> None:
    share = FairShare(total=4, per_identity=2)
    share.acquire("a")
    share.acquire("a")
    assert share.refusal("a") == "this identity holds 2, its share"
    assert share.refusal("b") is None
    share.acquire("b")
    share.acquire("b")
    assert share.refusal("c") == "4 are held in all"
    assert share.largest_holder() in ("a", "b")
    share.release("a")
    assert share.refusal("a") is None
    assert len(share) == 3


def test_without_identities_to_tell_apart_only_the_total_bounds() -> None:
    assert default_share(1000, identities=0) is None
    assert default_share(1000, identities=1) is None
    assert default_share(1000, identities=3) == 250
    share = FairShare(total=2, per_identity=None)
    share.acquire(None)
    assert share.refusal(None) is None
    share.acquire(None)
    assert share.refusal(None) == "2 are held in all"
